"""The optimiser and learning-rate schedule of ``genodiff train`` and ``genodiff finetune``."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn


def adamw_with_cosine(params: list[nn.Parameter], lr: float, cfg: Any, total_steps: int) -> dict:
    """AdamW (no weight decay on parameters marked ``_no_weight_decay``) with a per-step
    linear warm-up + cosine schedule, in Lightning's ``configure_optimizers`` format.

    ``cfg`` has ``betas``, ``eps``, ``weight_decay``, ``warmup_fraction``, ``min_lr_ratio``.
    """
    decay = [p for p in params if not getattr(p, "_no_weight_decay", False)]
    no_decay = [p for p in params if getattr(p, "_no_weight_decay", False)]
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
