"""The model ``genodiff train`` trains and every other command uses: a tokenizer, a backbone, an
objective (diffusion or next-token prediction) and their exponential moving averages, built from
a run's config.

``GenerativeModel`` is a plain ``nn.Module``: sampling, evaluation, the metrics and
fine-tuning load it (``genodiff.checkpoints.load_model``) without the Lightning
module that trains it (``genodiff.training.module``). Its state dict (``backbone.*``,
``objective.*``, ``ema.*``, ``objective_ema.*``) is the ``state_dict`` of a training checkpoint.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor, nn
from torch.optim.swa_utils import AveragedModel

from genodiff import backbones, registry
from genodiff.backbones.capabilities import capabilities_of
from genodiff.backbones.layout import constructor_defaults
from genodiff.backbones.meta_build import SkipInPlaceOnMeta
from genodiff.conditioning import class_names
from genodiff.config import TOKENIZER_FIELDS, ConfigError, EMAConfig, with_tokenizer_fields
from genodiff.memory import memory_limit, size_text
from genodiff.objectives import Objective
from genodiff.tokenizers import Tokenizer, build_tokenizer


def complete_config(config: dict[str, Any], tokenizer: Tokenizer) -> dict[str, Any]:
    """``config`` with the ids and sizes of the ``model`` and ``objective`` sections taken from
    ``tokenizer`` (``vocab_size``, ``mask_id``, ``pad_id``, ``bos_id``, ``sample_ids``), and
    ``model.num_classes`` from the class names of a labelled run (``conditioning.labels``)."""
    out = dict(config)
    for section, kind in (("model", "backbone"), ("objective", "objective")):
        kwargs = dict(config[section])
        cls = registry.get(kind, kwargs["name"])
        out[section] = with_tokenizer_fields(section, cls, kwargs, tokenizer)
    names = class_names(config)
    if names is not None:
        out["model"] = with_num_classes(out["model"], len(names))
    return out


def with_num_classes(model_cfg: dict[str, Any], num_classes: int) -> dict[str, Any]:
    """The ``model`` section of a run with ``num_classes`` labelled classes; ConfigError when
    that backbone cannot be conditioned on a label (its constructor takes no ``num_classes``,
    see ``Capabilities.class_conditioning``) or the section says another number."""
    name = model_cfg["name"]
    if "num_classes" not in constructor_defaults(registry.get("backbone", name).__init__):
        raise ConfigError(
            f"model.name={name} cannot be conditioned on class labels (it does not declare "
            "capabilities.class_conditioning), and this run's data is labelled "
            "(conditioning.labels). Use a backbone that can: caduceus (Ph or PS), mamba, "
            "hyena, or the text plugin's dit"
        )
    given = model_cfg.get("num_classes")
    if given not in (None, 0, num_classes):
        raise ConfigError(
            f"model.num_classes={given}, but the data has {num_classes} classes; remove "
            "model.num_classes: it comes from the labelled data"
        )
    return {**model_cfg, "num_classes": num_classes}


def check_class_conditioning(backbone: nn.Module, config: dict[str, Any]) -> None:
    """ConfigError when a labelled run's backbone does not declare
    ``capabilities.class_conditioning`` once built."""
    if class_names(config) is not None and not capabilities_of(backbone).class_conditioning:
        raise ConfigError(
            f"model.name={config['model']['name']} was built with num_classes but does not "
            "declare capabilities.class_conditioning: it cannot take the run's class labels"
        )


def build_objective(objective_cfg: dict[str, Any]) -> Objective:
    """The objective a (completed, see ``complete_config``) ``objective`` section names."""
    kwargs = dict(objective_cfg)
    return registry.get("objective", kwargs.pop("name")).from_saved(kwargs)


def check_time_conditioning(objective: Objective, backbone: nn.Module) -> None:
    """ConfigError when the objective would condition on time a backbone that ignores it."""
    if objective.time_conditioning and not capabilities_of(backbone).time_conditioning:
        # an objective whose default is off may go without (MDLM, SEDD, D3PM); UDLM may not
        optional = constructor_defaults(type(objective).__init__).get("time_conditioning") is False
        raise ConfigError(
            f"objective.time_conditioning=true, but the {type(backbone).__name__} backbone "
            "is not time-conditioned (it would ignore sigma). Build it with "
            "model.time_conditioning=true (Caduceus Ph or PS)"
            + (", set objective.time_conditioning=false" if optional else "")
            + ", or use a backbone that declares capabilities.time_conditioning (e.g. the "
            "text plugin's DiT)."
        )


def check_causality(objective: Objective, backbone: nn.Module, config: dict[str, Any]) -> None:
    """ConfigError when the backbone's ``capabilities.causal`` is not what the objective needs
    (``Objective.causal_backbone``): diffusion on a causal backbone would predict each masked
    token from its left context alone; next-token prediction on a bidirectional backbone would
    read the very token it predicts."""
    needed = objective.causal_backbone
    if needed is None or needed == capabilities_of(backbone).causal:
        return
    pair = f"objective.name={config['objective']['name']} with model.name={config['model']['name']}"
    if needed:
        raise ConfigError(
            f"{pair}: next-token prediction needs a causal backbone, and "
            f"{type(backbone).__name__} is bidirectional (it would read the token it predicts). "
            "Add a causal backbone (model=mamba or model=hyena for DNA), or use a "
            "diffusion objective (objective=mdlm) with this backbone"
        )
    raise ConfigError(
        f"{pair}: a diffusion objective needs a bidirectional backbone, and "
        f"{type(backbone).__name__} is causal (each position sees only the tokens before it). "
        "Add a bidirectional backbone (model=caduceus_ph for DNA), or use objective=ar with "
        "this backbone"
    )


def backbone_size(model_config: dict[str, Any]) -> tuple[int, int]:
    """The number of parameters of the backbone ``model_config`` describes, and the bytes of its
    parameters and buffers (a tied tensor once), from a build on the meta device, which
    allocates nothing (``genodiff.backbones.meta_build``)."""
    with torch.device("meta"), SkipInPlaceOnMeta():
        meta = backbones.build(**model_config)
    tensors = [*meta.parameters(), *meta.buffers()]  # a tied tensor once
    parameters = sum(p.numel() for p in meta.parameters())
    return parameters, sum(t.numel() * t.element_size() for t in tensors)


def check_backbone_fits(model_config: dict[str, Any], copies: int) -> None:
    """ConfigError, before any weight is allocated, when ``copies`` float tensors the size of
    the backbone ``model_config`` describes (its weights, their average, ...) need more memory
    than any one place on this machine has (``genodiff.memory.memory_limit``), counted by
    ``backbone_size``."""
    parameters, weights = backbone_size(model_config)
    needed, limit = copies * weights, memory_limit()
    if needed <= limit:
        return
    sizes = [
        key
        for key, value in model_config.items()
        if type(value) is int and value > 1 and key not in TOKENIZER_FIELDS
    ]
    settings = ", ".join(f"model.{key}={model_config[key]}" for key in sizes)
    raise ConfigError(
        f"model: the {model_config['name']} backbone of {settings} has {parameters:,} "
        f"parameters; with {copies} copies of its {weights:,} bytes of weights it needs "
        f"{needed:,} bytes ({size_text(needed)}), more than the {size_text(limit)} of memory "
        f"this machine has in one place; lower {' or '.join(f'model.{k}' for k in sizes[:2])}"
    )


class EMA(AveragedModel):
    """torch's AveragedModel with a constant decay, or min(decay, (1+k)/(10+k)) with warm-up.

    Floating-point parameters and buffers are averaged; an integer buffer (Caduceus-PS's
    ``complement_map``) has no average and holds the model's value."""

    def __init__(self, model: nn.Module, decay: float, warmup: bool) -> None:
        super().__init__(model, multi_avg_fn=self._average, use_buffers=True)
        self.decay, self.warmup = decay, warmup
        self.requires_grad_(False)

    def _average(self, averaged: list[Tensor], current: list[Tensor], num_updates: Tensor) -> None:
        k = int(num_updates)
        decay = min(self.decay, (1 + k) / (10 + k)) if self.warmup else self.decay
        for avg, cur in zip(averaged, current, strict=True):
            if avg.is_floating_point():
                avg.lerp_(cur, 1.0 - decay)
            else:
                avg.copy_(cur)


class GenerativeModel(nn.Module):
    """A diffusion or autoregressive language model as a run's config describes it: its
    ``tokenizer``, ``backbone`` and ``objective``, the averaged copies ``ema`` (of the backbone;
    None with ``ema.decay=0``) and ``objective_ema`` (of an objective with parameters of its
    own, such as Plaid's), and the completed ``config``. Sampling and scoring use
    ``eval_backbone`` and ``eval_objective``.

    ``genodiff.training.module.GenerativeTrainingModule`` extends it with the Lightning hooks
    that train it.
    """

    #: Tensors the size of the weights kept beside them and their average (none to sample
    #: and score; training adds the gradient and AdamW's two moments).
    state_copies: ClassVar[int] = 0

    def __init__(self, config: dict[str, Any], tokenizer: Tokenizer | None = None) -> None:
        super().__init__()
        self.tokenizer = (
            tokenizer if tokenizer is not None else build_tokenizer(config.get("tokenizer"))
        )
        config = complete_config(config, self.tokenizer)
        self.config = config
        ema_cfg = EMAConfig(**config.get("ema", {}))
        use_ema = ema_cfg.decay > 0
        check_backbone_fits(config["model"], copies=1 + use_ema + self.state_copies)
        self.backbone = backbones.build(**config["model"])
        self.objective = build_objective(config["objective"])
        check_time_conditioning(self.objective, self.backbone)
        check_causality(self.objective, self.backbone, config)
        self.objective.check_backbone(self.backbone)  # what else it needs (Plaid: its width)
        check_class_conditioning(self.backbone, config)
        #: The run's class names in label-id order (None: unconditional); the null label is
        #: ``genodiff.conditioning.null_label(len(class_names))``.
        self.class_names = class_names(config)
        self.ema = EMA(self.backbone, ema_cfg.decay, ema_cfg.warmup) if use_ema else None
        # Objectives with parameters of their own (Plaid) get their own average.
        has_params = any(True for _ in self.objective.parameters())
        self.objective_ema = (
            EMA(self.objective, ema_cfg.decay, ema_cfg.warmup) if use_ema and has_params else None
        )
        #: Where the weights come from, as a loader found it (``genodiff.checkpoints.load``):
        #: the training step, epoch, tokens seen, data digest, source file; an exported
        #: folder's also which weights it holds. Empty for a model built here.
        self.provenance: dict[str, Any] = {}

    @property
    def eval_backbone(self) -> nn.Module:
        """The weights used for validation and sampling: the EMA copy when there is one."""
        return self.ema.module if self.ema is not None else self.backbone

    @property
    def eval_objective(self) -> Objective:
        """The objective with averaged parameters, when it has parameters and EMA is on."""
        return self.objective_ema.module if self.objective_ema is not None else self.objective
