"""Checks and warnings on a training run's settings that need no Lightning, made before a
run imports it (``genodiff.training.run``): the ``trainer`` section as the Trainer gets it
(``trainer_kwargs``), an exponential moving average that could not move or would stay near
the initial weights."""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from genodiff.config import EMAConfig
from genodiff.config_values import ConfigError
from genodiff.user_warnings import warn_user


def trainer_kwargs(cfg: DictConfig, progress_bar: bool = True) -> dict[str, Any]:
    """The ``trainer`` section with precision resolved (``null`` = bf16 on GPU, fp32 on CPU)
    and the progress bar turned off unless ``progress_bar``."""
    kwargs = OmegaConf.to_container(cfg.trainer, resolve=True)
    if not progress_bar:
        kwargs["enable_progress_bar"] = False
    # genodiff.data.base.DataModule builds every loader and places each process's rows in the
    # global batch itself; Lightning's DistributedSampler would split them again.
    kwargs["use_distributed_sampler"] = False
    if kwargs.get("precision") is None:
        on_gpu = kwargs.get("accelerator", "auto") in ("auto", "gpu", "cuda")
        on_gpu = on_gpu and torch.cuda.is_available()
        kwargs["precision"] = "bf16-mixed" if on_gpu else "32-true"
    return kwargs


#: Lightning precisions that keep the weights themselves in 16 bits.
SIXTEEN_BIT_WEIGHTS = ("bf16-true", "16-true")


def check_ema_precision(precision: Any, ema_decay: float) -> None:
    """ConfigError for weights kept in 16 bits (``trainer.precision`` bf16-true or 16-true)
    with an average of them on (``ema.decay`` > 0): its step of weight 1 - decay is far below
    half a 16-bit ulp of the weight (bfloat16: 2^-9 of it), so the averaged weights -- those
    validation, the test score and the samples use -- never move from the first copy."""
    if str(precision) in SIXTEEN_BIT_WEIGHTS and ema_decay > 0:
        raise ConfigError(
            f"trainer.precision={precision} keeps the weights in 16 bits, where the EMA step of "
            f"weight 1 - ema.decay = {1 - ema_decay:.3g} is lost to rounding: the averaged "
            "weights (validation, test, samples) would never move. Use "
            "trainer.precision=bf16-mixed (16-bit compute, float32 weights) or ema.decay=0"
        )


def check_ema_moves(ema_decay: float, warmup: bool) -> None:
    """ConfigError for ``ema.decay`` = 1 without ``ema.warmup``: every update keeps the average
    as it is, so validation, the test score and the samples would use the initial weights
    (with the warm-up, update k takes (1 + k) / (10 + k) < 1 and the average moves)."""
    if ema_decay >= 1 and not warmup:
        raise ConfigError(
            "ema.decay=1 keeps the averaged weights (validation, test, samples) at their "
            "initial values: every update takes none of the trained weights. Use a decay "
            "below 1 (0.9999 in the hg38 recipe), ema.warmup=true, or ema.decay=0 for no average"
        )


#: The share of the first weights left in the average at the end of a run above which
#: ``warn_ema_stays_near_init`` speaks.
EMA_INITIAL_SHARE = 0.1


def warn_ema_stays_near_init(ema_decay: float, warmup: bool, max_steps: int | None) -> None:
    """``warn_user`` when an average of constant decay (``ema.warmup`` off) still holds
    more than ``EMA_INITIAL_SHARE`` of the first weights after the run's ``trainer.max_steps``
    updates (one per optimizer step): ema_decay ** max_steps of them. Validation, the choice
    of the best checkpoint, the test score and the samples all use the average, so they would
    measure a barely trained model (the hg38 recipe's 0.9999 keeps 96% after the 400 steps of
    ``trainer=cpu``)."""
    if warmup or not 0 < ema_decay < 1 or max_steps is None or max_steps < 1:
        return
    share = ema_decay**max_steps
    if share <= EMA_INITIAL_SHARE:
        return
    message = (
        f"ema.decay={ema_decay:g} without ema.warmup leaves {share * 100:.4g}% of the initial "
        f"weights in the average after trainer.max_steps={max_steps} steps, and validation, the "
        "best checkpoint, the test score and the samples use that average: they would measure a "
        "barely trained model. For a short run set ema.warmup=true and a smaller ema.decay "
        "(configs/demo.yaml: 0.999 with warm-up), or ema.decay=0 for no average"
    )
    warn_user(message)


def ema_settings(cfg: DictConfig) -> tuple[float, bool]:
    """The run's ``ema.decay`` and ``ema.warmup`` (``EMAConfig``'s where the config has none)."""
    decay = OmegaConf.select(cfg, "ema.decay", default=EMAConfig.decay)
    return decay, OmegaConf.select(cfg, "ema.warmup", default=EMAConfig.warmup)


#: Training's pace on a CPU, in operations per second: configs/demo.yaml's 6.6 million tokens
#: through 82,624 weights (about 3.2e12 operations, 6 per weight per token) in about 5 minutes
#: on 2 cores. A fixed estimate, not measured on the machine at hand: a float32 matmul probe
#: (best of 50 ms) is no proxy for a training step, which on 2 cores ran at 0.7-3% of the
#: probe's rate (4.5x apart between runs and thread counts), and on a busy machine 2 threads
#: probed faster than 1 while they trained slower.
CPU_OPERATIONS_PER_SECOND = 1e10
#: A run on the CPU that would take longer than this at that pace is warned of.
CPU_RUN_WARNING_SECONDS = 24 * 3600


def warn_gpu_scale_on_cpu(
    steps: int | None, windows: int, window: int | None, weights: int
) -> None:
    """``warn_user`` for a run on the CPU of ``steps`` (``trainer.max_steps``) optimizer
    steps of ``windows`` windows (the global batch) of ``window`` tokens through ``weights``
    weights that would take longer than ``CPU_RUN_WARNING_SECONDS`` at
    ``CPU_OPERATIONS_PER_SECOND`` (about 6 operations per weight per token): the hg38 recipes'
    52 billion tokens would take months, with only the progress line's ETA to say so. The
    message says the days are an estimate at that pace. No step limit (-1) or no window
    length: nothing is said."""
    if steps is None or steps < 1 or not window:
        return
    tokens = steps * windows * window
    pace = CPU_OPERATIONS_PER_SECOND
    seconds = 6 * weights * tokens / pace
    if seconds <= CPU_RUN_WARNING_SECONDS:
        return
    message = (
        f"this run is sized for GPUs: trainer.max_steps={steps:,} steps of {windows:,} windows "
        f"of {window:,} tokens ({tokens:.3g} tokens) through {weights:,} weights, and it trains "
        f"on the CPU, where that takes about {seconds / 86400:,.0f} days (an estimate at "
        f"{pace:.3g} operations a second, 6 per weight per token: the pace of "
        "configs/demo.yaml, 6.6 million tokens in about 5 minutes on 2 cores; more or faster "
        "cores may take fewer days, a slow or busy CPU more). Train it on a GPU "
        "(docs/gpu.md), train configs/demo.yaml for a run on the CPU, or lower "
        "trainer.max_steps"
    )
    warn_user(message)
