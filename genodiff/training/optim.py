"""The optimiser and learning-rate schedule of ``genodiff train``, ``genodiff finetune`` and
``genodiff classifier``: which parameters train without weight decay, and which with settings
of their own (upstream's ``_optim``: HyenaDNA's filter)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import nn

#: Modules whose parameters (at any depth) train without weight decay, as in Caduceus's
#: training code (``add_optimizer_hooks`` in its ``src/utils/optim_groups.py``, with its
#: ``configs/config.yaml``'s ``bias_weight_decay: False`` and ``normalization_weight_decay:
#: False``): embeddings, so also an output layer tied to them, and torch's normalization
#: layers. mamba-ssm's ``RMSNorm`` is no ``nn.LayerNorm``, so upstream decays the RMSNorm
#: weights of Caduceus and Mamba, and genodiff decays its ``RMSNorm``'s too.
NO_DECAY_MODULES = (
    nn.Embedding,
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    nn.GroupNorm,
    nn.SyncBatchNorm,
    nn.InstanceNorm1d,
    nn.InstanceNorm2d,
    nn.InstanceNorm3d,
    nn.LayerNorm,
    nn.LocalResponseNorm,
)


#: The own settings of the group of parameters that train without weight decay (group 1).
NO_DECAY = {"weight_decay": 0.0}


def _marked(param: nn.Parameter) -> bool:
    """Whether ``param`` is marked to train without weight decay: ``_no_weight_decay``, or
    settings of its own (``_optim``) with weight decay 0, which genodiff marked
    ``_no_weight_decay`` before it honoured them (the Hyena filter's)."""
    own = getattr(param, "_optim", {})
    return getattr(param, "_no_weight_decay", False) or own.get("weight_decay") == 0.0


def _exempt_from_decay(modules: Iterable[nn.Module], marks: bool = True) -> set[int]:
    """The ids of the parameters of ``modules`` that train without weight decay: those marked
    ``_no_weight_decay`` (Mamba's ``A_log`` and ``D``, ...; ``marks=False``: none), every
    parameter whose name ends in ``bias``, and every parameter inside a ``NO_DECAY_MODULES``
    module."""
    exempt = set()
    for module in modules:
        for name, param in module.named_parameters(remove_duplicate=False):
            if (marks and _marked(param)) or name.endswith("bias"):
                exempt.add(id(param))
        for inner in module.modules():
            if isinstance(inner, NO_DECAY_MODULES):
                exempt.update(id(param) for param in inner.parameters())
    return exempt


def _trainable(modules: Sequence[nn.Module]) -> list[nn.Parameter]:
    """The trainable parameters of ``modules``, each once, in their order."""
    return list({id(p): p for m in modules for p in m.parameters() if p.requires_grad}.values())


def decay_groups(
    modules: Sequence[nn.Module], upstream: bool = True, marks: bool = True
) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """The trainable parameters of ``modules``, in their order, split into those trained with
    weight decay and those without (``_exempt_from_decay``), whatever settings of their own
    they carry (``parameter_groups`` honours those). ``upstream=False``: the split of genodiff
    before it followed Caduceus, which exempted only the parameters marked
    ``_no_weight_decay`` (how the optimizer state of its checkpoints is laid out).
    ``marks=False``: as if no parameter were marked, the split of a fine-tune of a pretrained
    backbone before ``copy_settings`` gave its copies their marks back."""
    params = _trainable(modules)
    if upstream:
        exempt = _exempt_from_decay(modules, marks)
    else:
        exempt = {id(p) for p in params if _marked(p)}
    decay = [p for p in params if id(p) not in exempt]
    return decay, [p for p in params if id(p) in exempt]


def parameter_groups(
    modules: Sequence[nn.Module],
) -> list[tuple[dict[str, float], list[nn.Parameter]]]:
    """The optimizer's parameter groups over the trainable parameters of ``modules``, each as
    (its own settings, its parameters in their order); a group's own settings override the
    optimizer's (``group_settings``). Group 0 has none (weight decay, the optimizer's lr),
    group 1 is ``NO_DECAY``: the parameters ``decay_groups`` exempts. A parameter that carries
    settings of its own, upstream's ``_optim`` dict (``lr`` and/or ``weight_decay``: HyenaDNA's
    filter, with its ``layer.lr``, ``layer.wd`` and ``lr_pos_emb``), trains with those instead:
    in group 1 when they are ``NO_DECAY``, else in a group of its own per distinct dict, after
    these two, in the parameters' order (as upstream's ``configure_optimizers`` in
    HazyResearch/hyena-dna's ``train.py`` adds one group per distinct ``_optim``)."""
    exempt = _exempt_from_decay(modules)
    groups: dict[frozenset, list[nn.Parameter]] = {frozenset(): [], frozenset(NO_DECAY.items()): []}
    for param in _trainable(modules):
        rule = NO_DECAY if id(param) in exempt else {}
        own = getattr(param, "_optim", rule)
        groups.setdefault(frozenset(own.items()), []).append(param)
    return [(dict(own), params) for own, params in groups.items()]


#: The attributes by which a parameter carries settings of its own (``_exempt_from_decay``,
#: ``parameter_groups``).
SETTINGS_ATTRIBUTES = ("_no_weight_decay", "_optim")


def copy_settings(source: nn.Module, duplicate: nn.Module) -> nn.Module:
    """``duplicate``, a copy of ``source``, given the settings of their own that the parameters
    of ``source`` carry, parameter by parameter (``copy.deepcopy`` of a module, so torch's
    ``AveragedModel`` too, copies its parameters without them)."""
    for original, copied in zip(source.parameters(), duplicate.parameters(), strict=True):
        for name in SETTINGS_ATTRIBUTES:
            if hasattr(original, name):
                setattr(copied, name, getattr(original, name))
    return duplicate


def follow_the_optimizer_lr(module: nn.Module) -> None:
    """Drop the learning rate from the settings of their own (``_optim``) that parameters of
    ``module`` carry: they train at the optimizer's, with their own weight decay."""
    for param in module.parameters():
        own = getattr(param, "_optim", {})
        if "lr" in own:
            param._optim = {k: v for k, v in own.items() if k != "lr"}


def regroup_earlier_optimizer_state(
    checkpoint: dict[str, Any], modules: Sequence[nn.Module]
) -> None:
    """Lay out the optimizer state of ``checkpoint`` (Lightning's, changed in place), written
    by ``adamw_with_cosine`` over ``modules`` with the two groups of an earlier genodiff, in
    today's groups (``parameter_groups``): each parameter keeps its moments, now in the group
    its settings say. The earlier groups: those before genodiff honoured settings of a
    parameter's own (``decay_groups()``: the Hyena filter's ``layer.lr`` and ``lr_pos_emb``
    unused, its ``layer.wd`` only exempting it when 0), those of a fine-tune of a pretrained
    backbone whose copy had lost its marks (``decay_groups(marks=False)``), and those before
    genodiff followed Caduceus (``decay_groups(upstream=False)``). A group the state lacks
    starts from group 0's saved settings with its own, in the optimizer and in the schedule.
    A state in today's groups, or in none of these, is left as it is."""
    states = checkpoint.get("optimizer_states") or []
    if len(states) != 1:
        return
    saved = [len(group["params"]) for group in states[0].get("param_groups", [])]
    now = parameter_groups(modules)
    if saved == [len(params) for _, params in now]:
        return
    earlier = [
        decay_groups(modules),
        decay_groups(modules, marks=False),
        decay_groups(modules, upstream=False),
    ]
    fitting = {_ids(b): b for b in earlier if saved == [len(params) for params in b]}
    if len(fitting) != 1:  # none, or sizes that fit two layouts: which one is unknown
        return
    (before,) = fitting.values()
    _move_moments(states[0], [*before[0], *before[1]], [p for _, params in now for p in params])
    _lay_out_groups(checkpoint, [(own, len(params)) for own, params in now])


def _ids(groups: Sequence[list[nn.Parameter]]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(id(p) for p in params) for params in groups)


def _move_moments(
    state: dict[str, Any], order_before: list[nn.Parameter], order_now: list[nn.Parameter]
) -> None:
    """Renumber the per-parameter state of ``state`` from the parameters' order in the
    earlier groups to their order in today's."""
    index_before = {id(p): i for i, p in enumerate(order_before)}
    moments = state["state"]
    state["state"] = {
        i: moments[index_before[id(p)]]
        for i, p in enumerate(order_now)
        if index_before[id(p)] in moments
    }


def _lay_out_groups(checkpoint: dict[str, Any], layout: list[tuple[dict[str, float], int]]) -> None:
    """Give the optimizer state of ``checkpoint`` the groups of ``layout`` (each group's own
    settings and size, in order), and its schedule their learning rates. The saved groups keep
    their settings; a new one takes group 0's with its own, at group 0's point of the
    schedule."""
    groups = checkpoint["optimizer_states"][0]["param_groups"]
    base = groups[0]
    initial = base.get("initial_lr", base["lr"])
    factor = base["lr"] / initial if initial else 1.0
    for own in [own for own, _ in layout[len(groups) :]]:
        start = own.get("lr", initial)
        weight_decay = own.get("weight_decay", base["weight_decay"])
        groups.append(
            {**base, "weight_decay": weight_decay, "initial_lr": start, "lr": start * factor}
        )
    first = 0
    for group, (_, size) in zip(groups, layout, strict=True):
        group["params"] = list(range(first, first + size))
        first += size
    for schedule in checkpoint.get("lr_schedulers") or []:
        if "base_lrs" in schedule:
            schedule["base_lrs"] = [group.get("initial_lr", group["lr"]) for group in groups]
            schedule["_last_lr"] = [group["lr"] for group in groups]


def adamw_with_cosine(modules: Sequence[nn.Module], lr: float, cfg: Any, total_steps: int) -> dict:
    """AdamW over the trainable parameters of ``modules`` in the groups of ``parameter_groups``
    (weight decay on those ``decay_groups`` says; settings of a parameter's own honoured), with
    a per-step linear warm-up + cosine schedule that scales each group's own lr, in
    Lightning's ``configure_optimizers`` format.

    ``cfg`` has ``betas``, ``eps``, ``weight_decay``, ``warmup_fraction``, ``min_lr_ratio``.
    """
    groups = parameter_groups(modules)
    settings = group_settings(lr, cfg, [own for own, _ in groups])
    optimizer = torch.optim.AdamW(
        [{"params": params, **s} for (_, params), s in zip(groups, settings, strict=True)], lr=lr
    )
    total = max(total_steps, 1)
    warmup = int(cfg.warmup_fraction * total)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: cosine_with_warmup(step, warmup, total, cfg.min_lr_ratio)
    )
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


def cosine_with_warmup(step: int, warmup: int, total: int, min_ratio: float) -> float:
    """LR multiplier: linear 0 -> 1 over ``warmup`` steps, then cosine 1 -> ``min_ratio``."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min((step - warmup) / max(total - warmup, 1), 1.0)
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def apply_settings(
    optimizer: torch.optim.Optimizer,
    schedule: torch.optim.lr_scheduler.LambdaLR,
    modules: Sequence[nn.Module],
    lr: float,
    cfg: Any,
) -> None:
    """Give an optimizer and schedule built by ``adamw_with_cosine`` over ``modules`` the
    settings ``lr`` and ``cfg`` (``betas``, ``eps``, ``weight_decay``) again, each group with
    its own (``parameter_groups``): a resumed run's, over those Lightning restored from its
    checkpoint with the optimizer's state. The schedule keeps its step; each group's lr
    becomes its own lr times the schedule's multiplier at that step."""
    groups, factors = optimizer.param_groups, schedule.lr_lambdas
    settings = group_settings(lr, cfg, [own for own, _ in parameter_groups(modules)])
    for group, these, factor in zip(groups, settings, factors, strict=True):
        group.update(these, initial_lr=these["lr"], lr=these["lr"] * factor(schedule.last_epoch))
    schedule.base_lrs = [these["lr"] for these in settings]


def group_settings(lr: float, cfg: Any, own: Sequence[dict[str, float]]) -> list[dict[str, Any]]:
    """AdamW's settings of parameter groups whose own settings are ``own``
    (``parameter_groups``): ``lr`` and ``cfg``'s ``betas``, ``eps`` and ``weight_decay``, each
    overridden by the group's own (``{"weight_decay": 0.0}``: the group without weight decay)."""
    common = {"lr": lr, "betas": tuple(cfg.betas), "eps": cfg.eps, "weight_decay": cfg.weight_decay}
    return [{**common, **these} for these in own]
