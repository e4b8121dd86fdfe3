"""The optimiser and learning-rate schedule of ``genodiff train``, ``genodiff finetune`` and
``genodiff classifier``, and which parameters train without weight decay."""

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


def _marked(param: nn.Parameter) -> bool:
    return getattr(param, "_no_weight_decay", False)


def _exempt_from_decay(modules: Iterable[nn.Module]) -> set[int]:
    """The ids of the parameters of ``modules`` that train without weight decay: those marked
    ``_no_weight_decay`` (Mamba's ``A_log`` and ``D``, ...), every parameter whose name ends
    in ``bias``, and every parameter inside a ``NO_DECAY_MODULES`` module."""
    exempt = set()
    for module in modules:
        for name, param in module.named_parameters(remove_duplicate=False):
            if _marked(param) or name.endswith("bias"):
                exempt.add(id(param))
        for inner in module.modules():
            if isinstance(inner, NO_DECAY_MODULES):
                exempt.update(id(param) for param in inner.parameters())
    return exempt


def decay_groups(
    modules: Sequence[nn.Module], upstream: bool = True
) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """The trainable parameters of ``modules``, in their order, split into those trained with
    weight decay and those without (``_exempt_from_decay``). ``upstream=False``: the split of
    genodiff before it followed Caduceus, which exempted only the parameters marked
    ``_no_weight_decay`` (how the optimizer state of its checkpoints is laid out)."""
    params = list({id(p): p for m in modules for p in m.parameters() if p.requires_grad}.values())
    exempt = _exempt_from_decay(modules) if upstream else {id(p) for p in params if _marked(p)}
    decay = [p for p in params if id(p) not in exempt]
    return decay, [p for p in params if id(p) in exempt]


def regroup_earlier_optimizer_state(
    checkpoint: dict[str, Any], modules: Sequence[nn.Module]
) -> None:
    """Lay out the optimizer state of ``checkpoint`` (Lightning's, changed in place), written
    by ``adamw_with_cosine`` over ``modules`` with the groups of genodiff before it followed
    Caduceus (``decay_groups(upstream=False)``), in today's groups: each parameter keeps its
    moments, now in the group its weight decay says. A state in today's groups, or in none of
    these, is left as it is."""
    states = checkpoint.get("optimizer_states") or []
    if len(states) != 1 or len(states[0].get("param_groups", [])) != 2:
        return
    state = states[0]
    saved = [len(group["params"]) for group in state["param_groups"]]
    now, before = decay_groups(modules), decay_groups(modules, upstream=False)
    if saved == [len(g) for g in now] or saved != [len(g) for g in before]:
        return
    index_before = {id(p): i for i, p in enumerate([*before[0], *before[1]])}
    order_now = [*now[0], *now[1]]
    moments = state["state"]
    state["state"] = {
        i: moments[index_before[id(p)]]
        for i, p in enumerate(order_now)
        if index_before[id(p)] in moments
    }
    first = 0
    for group, params in zip(state["param_groups"], now, strict=True):
        group["params"] = list(range(first, first + len(params)))
        first += len(params)


def adamw_with_cosine(modules: Sequence[nn.Module], lr: float, cfg: Any, total_steps: int) -> dict:
    """AdamW over the trainable parameters of ``modules``, weight decay on those
    ``decay_groups`` says, with a per-step linear warm-up + cosine schedule, in Lightning's
    ``configure_optimizers`` format.

    ``cfg`` has ``betas``, ``eps``, ``weight_decay``, ``warmup_fraction``, ``min_lr_ratio``.
    """
    decay, no_decay = decay_groups(modules)
    with_decay, without = group_settings(lr, cfg)
    optimizer = torch.optim.AdamW(
        [{"params": decay, **with_decay}, {"params": no_decay, **without}], lr=lr
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
    lr: float,
    cfg: Any,
) -> None:
    """Give an optimizer and schedule built by ``adamw_with_cosine`` the settings ``lr`` and
    ``cfg`` (``betas``, ``eps``, ``weight_decay``) again: a resumed run's own, over those
    Lightning restored from its checkpoint with the optimizer's state. The schedule keeps its
    step; the lr becomes the schedule's at that step."""
    groups, factors = optimizer.param_groups, schedule.lr_lambdas
    for group, settings, factor in zip(groups, group_settings(lr, cfg), factors, strict=True):
        group.update(settings, initial_lr=lr, lr=lr * factor(schedule.last_epoch))
    schedule.base_lrs = [lr] * len(groups)


def group_settings(lr: float, cfg: Any) -> list[dict[str, Any]]:
    """AdamW's settings of ``adamw_with_cosine``'s two parameter groups: with weight decay,
    without it."""
    common = {"lr": lr, "betas": tuple(cfg.betas), "eps": cfg.eps}
    return [{**common, "weight_decay": cfg.weight_decay}, {**common, "weight_decay": 0.0}]
