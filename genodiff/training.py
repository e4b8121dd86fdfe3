"""The LightningModule: backbone + objective + EMA + metrics + optimizer, and the Trainer setup."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_warn
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, OmegaConf
from torch import Tensor, nn
from torch.optim.swa_utils import AveragedModel
from torchmetrics import SumMetric

from genodiff import backbones, hub, registry
from genodiff.backbones.capabilities import capabilities_of
from genodiff.checkpoint_io import AtomicCheckpointIO, read_checkpoint
from genodiff.checkpoints import FOLDER_FILES, RUN_RECORD_FILE, RUN_STATE_KEY, load_pretrained
from genodiff.config import ConfigError, EMAConfig, OptimConfig, with_tokenizer_fields
from genodiff.data.base import DataModule, files_digest
from genodiff.data.loaders import batch_shard
from genodiff.errors import InputFileNotFoundError, InputValueError, TrainingDivergedError
from genodiff.objectives import Objective
from genodiff.run_folder import CHECKPOINT_FOLDER
from genodiff.tokenizers import (
    CHECKPOINT_KEY,
    Tokenizer,
    build_tokenizer,
    load_tokenizer,
    tokenizer_from_checkpoint,
    tokenizer_record,
)


def complete_config(config: dict[str, Any], tokenizer: Tokenizer) -> dict[str, Any]:
    """``config`` with the ids and sizes of the ``model`` and ``objective`` sections taken from
    ``tokenizer`` (``vocab_size``, ``mask_id``, ``pad_id``, ``bos_id``, ``sample_ids``)."""
    out = dict(config)
    for section, kind in (("model", "backbone"), ("objective", "objective")):
        kwargs = dict(config[section])
        cls = registry.get(kind, kwargs["name"])
        out[section] = with_tokenizer_fields(section, cls, kwargs, tokenizer)
    return out


def build_objective(objective_cfg: dict[str, Any]) -> Objective:
    """The objective a (completed, see ``complete_config``) ``objective`` section names."""
    kwargs = dict(objective_cfg)
    return registry.get("objective", kwargs.pop("name"))(**kwargs)


def check_time_conditioning(objective: Objective, backbone: nn.Module) -> None:
    """ConfigError when the objective would condition on time a backbone that ignores it."""
    wanted = getattr(objective, "time_conditioning", False)
    if wanted and not capabilities_of(backbone).time_conditioning:
        raise ConfigError(
            f"objective.time_conditioning=true, but the {type(backbone).__name__} backbone "
            "is not time-conditioned (it would ignore sigma). Set "
            "objective.time_conditioning=false, or use a backbone that declares "
            "capabilities.time_conditioning (e.g. the text plugin's DiT)."
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
            "Add model=mamba or model=hyena (text: model=ar_transformer_small), or use a "
            "diffusion objective (objective=mdlm) with this backbone"
        )
    raise ConfigError(
        f"{pair}: a diffusion objective needs a bidirectional backbone, and "
        f"{type(backbone).__name__} is causal (each position sees only the tokens before it). "
        "Add model=caduceus_ph (text: model=dit_small), or use objective=ar with this backbone"
    )


def build_datamodule(data_cfg: dict[str, Any]) -> DataModule:
    kwargs = dict(data_cfg)
    name = kwargs.pop("name")
    cls = registry.get("data", name)
    if not (isinstance(cls, type) and issubclass(cls, DataModule)):  # its loaders: unsharded
        raise ConfigError(
            f"data.name={name!r} is {cls!r}, not a subclass of genodiff.data.base.DataModule "
            "(which builds the loaders that every data module must use)"
        )
    return cls(**kwargs)


def prepare_tokenizer(cfg: DictConfig, datamodule: Any) -> Tokenizer:
    """The run's tokenizer: the one saved in ``output_dir`` when resuming (``ckpt_path``),
    else the ``tokenizer:`` section's (trained on ``datamodule.training_texts()`` when that
    tokenizer learns its vocabulary from the data)."""
    if cfg.ckpt_path:
        saved = load_tokenizer(cfg.output_dir)
        if saved is not None:
            return saved
    section = OmegaConf.to_container(cfg.tokenizer, resolve=True)
    return build_tokenizer(section, corpus=datamodule.training_texts)


def init_backbone(backbone: nn.Module, folder: str | Path) -> None:
    """Copy the weights of a Hugging-Face-format folder (``genodiff export``, a Caduceus MLM,
    a mamba_ssm or HyenaDNA release), or of a Hub id ``org/name[@revision]`` holding one, into
    ``backbone``; every tensor must match."""
    pretrained = load_pretrained(folder)
    source, target = pretrained.state_dict(), backbone.state_dict()
    missing = sorted(set(target) - set(source))
    unexpected = sorted(set(source) - set(target))
    mismatched = sorted(k for k in set(source) & set(target) if source[k].shape != target[k].shape)
    if missing or unexpected or mismatched:
        details = "; ".join(
            f"{label}: {', '.join(keys[:5])}{' ...' if len(keys) > 5 else ''}"
            for label, keys in (
                ("missing", missing),
                ("unexpected", unexpected),
                ("shape mismatch", mismatched),
            )
            if keys
        )
        raise InputValueError(
            f"init_from={folder}: its weights do not fit the configured model ({details}). "
            "Pick the model config that matches the folder's config.json."
        )
    backbone.load_state_dict(source)


class EMA(AveragedModel):
    """torch's AveragedModel with a constant decay, or min(decay, (1+k)/(10+k)) with warm-up."""

    def __init__(self, model: nn.Module, decay: float, warmup: bool) -> None:
        super().__init__(model, multi_avg_fn=self._average, use_buffers=True)
        self.decay, self.warmup = decay, warmup
        self.requires_grad_(False)

    def _average(self, averaged: list[Tensor], current: list[Tensor], num_updates: Tensor) -> None:
        k = int(num_updates)
        decay = min(self.decay, (1 + k) / (10 + k)) if self.warmup else self.decay
        for avg, cur in zip(averaged, current, strict=True):
            avg.lerp_(cur, 1.0 - decay)


# Where a training checkpoint keeps the global torch RNG states (the objective's noise draws
# and dropout use them), so that a resumed run draws what an uninterrupted one would.
RNG_KEY = "genodiff_rng"
NOISE_KEY = "genodiff_training_noise"  # the state of DiffusionLM.training_noise


def rng_state() -> dict[str, Any]:
    """The global torch RNG states (CPU and every CUDA device)."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    return {"torch": torch.get_rng_state(), "cuda": cuda}


def seeded_generator(seed: int, purpose: str, device: torch.device) -> torch.Generator:
    """A generator on ``device`` seeded from ``(seed, purpose)``: one stream per purpose."""
    entropy = (seed, *purpose.encode())
    state = int(np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint64)[0] >> 1)
    return torch.Generator(device=device).manual_seed(state)


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class RandomStateInCheckpoints(L.LightningModule):
    """A LightningModule whose checkpoints carry the global RNG state (CPU and CUDA): a resumed
    run restores it when training starts, so random augmentation and noise go on exactly as
    in an uninterrupted run. Subclasses add to the hooks with ``super()``."""

    _rng_to_restore: dict[str, Any] | None = None

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint[RNG_KEY] = rng_state()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self._rng_to_restore = checkpoint.get(RNG_KEY)

    def on_train_start(self) -> None:
        # on_load_checkpoint runs before Lightning sets up the loops, which must not shift it.
        if self._rng_to_restore is not None:
            set_rng_state(self._rng_to_restore)
            self._rng_to_restore = None


class DiffusionLM(RandomStateInCheckpoints):
    """Trains ``backbone`` with ``objective``; validation and sampling use the EMA weights.

    Logged metrics: ``train/nelbo``, ``val/nelbo`` and ``test/nelbo`` (nats per token), and
    ``val/ppl``, ``test/ppl`` (perplexity bound = exp of the NELBO summed over all held-out
    tokens divided by their number).
    """

    def __init__(self, config: dict[str, Any], tokenizer: Tokenizer | None = None) -> None:
        super().__init__()
        self.tokenizer = (
            tokenizer if tokenizer is not None else build_tokenizer(config.get("tokenizer"))
        )
        config = complete_config(config, self.tokenizer)
        self.save_hyperparameters({"config": config})
        self.config = config
        self.backbone = backbones.build(**config["model"])
        self.objective = build_objective(config["objective"])
        check_time_conditioning(self.objective, self.backbone)
        check_causality(self.objective, self.backbone, config)
        self.optim_cfg = OptimConfig(**config.get("optim", {}))
        ema_cfg = EMAConfig(**config.get("ema", {}))
        use_ema = ema_cfg.decay > 0
        self.ema = EMA(self.backbone, ema_cfg.decay, ema_cfg.warmup) if use_ema else None
        # Objectives with parameters of their own (Plaid) get their own average.
        has_params = any(True for _ in self.objective.parameters())
        self.objective_ema = (
            EMA(self.objective, ema_cfg.decay, ema_cfg.warmup) if use_ema and has_params else None
        )
        # nan_strategy="disable": a NaN must reach _log_heldout, not be dropped as a warning.
        self.heldout_nelbo = SumMetric(nan_strategy="disable")
        self.heldout_tokens = SumMetric(nan_strategy="disable")
        self._seed = int(config.get("seed", 0))
        self.training_noise: torch.Generator | None = None  # set in on_train_start
        self._noise_to_restore: Tensor | None = None
        self.heldout_noise: torch.Generator | None = None  # set at each validation / test
        # Token positions (padding included) in every training batch of every process so far.
        self.tokens_seen = 0
        self.data_digest: str | None = None  # of the training data files (see record_data)

    def record_data(self, datamodule: DataModule) -> None:
        """Hash the files the training data comes from into every checkpoint of the run."""
        files = datamodule.data_files()
        self.data_digest = files_digest(files) if files else None

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_save_checkpoint(checkpoint)
        checkpoint[CHECKPOINT_KEY] = tokenizer_record(self.tokenizer)
        if self.training_noise is not None:
            checkpoint[NOISE_KEY] = self.training_noise.get_state()
        checkpoint[RUN_STATE_KEY] = {
            "tokens_seen": self.tokens_seen,
            "data_digest": self.data_digest,
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_load_checkpoint(checkpoint)
        self._noise_to_restore = checkpoint.get(NOISE_KEY)
        run = checkpoint.get(RUN_STATE_KEY, {})
        self.tokens_seen = run.get("tokens_seen", 0)
        recorded = run.get("data_digest")
        if self.data_digest is None:
            self.data_digest = recorded
        elif recorded is not None and recorded != self.data_digest:
            rank_zero_warn(
                f"the training data files differ from those the checkpoint was trained on "
                f"({recorded} then, {self.data_digest} now); checkpoints from here on record "
                "the new digest"
            )

    def on_train_start(self) -> None:
        # The training noise has a generator of its own, seeded from the run's seed alone: the
        # same stream on every DDP process (each keeps its rows of the global batch's draws)
        # and in a one-process run, whatever the launcher did to the global RNG.
        self.training_noise = seeded_generator(self._seed, "training noise", self.device)
        if self._noise_to_restore is not None:  # resuming: go on where the checkpoint left it
            self.training_noise.set_state(self._noise_to_restore)
            self._noise_to_restore = None
        super().on_train_start()

    def _start_heldout(self) -> None:
        # Every validation and test draws the same noise (common random numbers: checkpoints
        # are compared on equal draws), without touching the training stream.
        self.heldout_noise = seeded_generator(self._seed, "held-out noise", self.device)

    def on_validation_epoch_start(self) -> None:
        self._start_heldout()

    def on_test_epoch_start(self) -> None:
        self._start_heldout()

    def _non_finite(self, what: str, value: Tensor, advice: str) -> TrainingDivergedError:
        """The error that stops a run on a non-finite ``what``; says how to go on."""
        callback = self.trainer.checkpoint_callback
        last = Path(callback.last_model_path) if callback and callback.last_model_path else None
        if last is not None and last.is_file():
            then = f"then resume from {last} with ckpt_path=last"
        else:
            then = "then start the run again (no checkpoint was written before this step)"
        return TrainingDivergedError(
            f"{what} is {value.item()} at step {self.global_step}; no checkpoint was written for "
            f"this step. {advice}, {then}."
        )

    @property
    def eval_backbone(self) -> nn.Module:
        """The weights used for validation and sampling: the EMA copy when there is one."""
        return self.ema.module if self.ema is not None else self.backbone

    def init_from_pretrained(self, folder: str | Path) -> None:
        """Start from the backbone weights of a Hugging-Face-format folder (``init_from=DIR``)."""
        init_backbone(self.backbone, folder)
        if self.ema is not None:
            init_backbone(self.ema.module, folder)

    @property
    def eval_objective(self) -> Objective:
        """The objective with averaged parameters, when it has parameters and EMA is on."""
        return self.objective_ema.module if self.objective_ema is not None else self.objective

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        ids = batch["input_ids"]  # (B, L)
        shard = batch_shard(self.trainer, ids.shape[0])  # None on one process
        nelbo, tokens = self.objective.loss(self.backbone, ids, self.training_noise, shard)
        # NELBO and scored tokens of the global batch (summed over the processes). The loss is
        # this process's part of the global mean, so DDP's gradient average equals the gradient
        # of one process on the whole global batch.
        totals = torch.stack([nelbo.sum().detach(), tokens.sum().to(nelbo.dtype)])
        if shard is not None:
            totals = self.trainer.strategy.reduce(totals, reduce_op="sum")
        global_tokens = totals[1].clamp_min(1)
        global_nelbo = totals[0] / global_tokens
        if not torch.isfinite(global_nelbo):
            advice = (
                "Lower optim.lr, keep trainer.gradient_clip_val, or train in fp32 "
                "(trainer.precision=32-true)"
            )
            raise self._non_finite("training loss", global_nelbo, advice)
        self.log("train/nelbo", global_nelbo, prog_bar=True)
        self.tokens_seen += ids.numel() * self.trainer.world_size
        return nelbo.sum() * self.trainer.world_size / global_tokens

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.ema is not None:
            self.ema.update_parameters(self.backbone)
        if self.objective_ema is not None:
            self.objective_ema.update_parameters(self.objective)

    def _heldout_step(self, batch: dict[str, Tensor]) -> None:
        """Accumulate the NELBO of ``eval_t_samples`` noise draws per window (EMA weights)."""
        objective, ids = self.eval_objective, batch["input_ids"]  # (B, L)
        shard = batch_shard(self.trainer, ids.shape[0])  # None on one process
        for _ in range(objective.eval_t_samples):
            nelbo, tokens = objective.loss(self.eval_backbone, ids, self.heldout_noise, shard)
            self.heldout_nelbo.update(nelbo.sum())
            self.heldout_tokens.update(tokens.sum())

    def _log_heldout(self, stage: str) -> None:
        nelbo = self.heldout_nelbo.compute() / self.heldout_tokens.compute().clamp_min(1)
        if not torch.isfinite(nelbo):
            advice = (
                "Check ema.decay (in [0, 1]; ema.decay=0 turns the average off), lower optim.lr "
                "or train in fp32 (trainer.precision=32-true)"
            )
            raise self._non_finite(f"the {stage} NELBO", nelbo, advice)
        # Already the total over every process (SumMetric syncs): sync_dist averages equal values.
        self.log(f"{stage}/nelbo", nelbo, prog_bar=True, sync_dist=True)
        self.log(f"{stage}/ppl", torch.exp(nelbo), prog_bar=True, sync_dist=True)
        self.heldout_nelbo.reset()
        self.heldout_tokens.reset()

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._heldout_step(batch)

    def on_validation_epoch_end(self) -> None:
        self._log_heldout("val")

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._heldout_step(batch)

    def on_test_epoch_end(self) -> None:
        self._log_heldout("test")

    def configure_optimizers(self) -> dict[str, Any]:
        modules = (self.backbone, self.objective)
        params = [p for m in modules for p in m.parameters() if p.requires_grad]
        total = int(self.trainer.estimated_stepping_batches)
        return adamw_with_cosine(params, self.optim_cfg.lr, self.optim_cfg, total)


# What a training run may be stored as in a folder or Hub repository: a folder that
# ``genodiff export`` wrote (backbone files + genodiff.json) or a training checkpoint (*.ckpt).
RUN_FILES = (*FOLDER_FILES, RUN_RECORD_FILE, "*.ckpt")


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> DiffusionLM:
    """A ``genodiff train`` run with its tokenizer, in eval mode. ``path`` is

    - a training checkpoint (.ckpt);
    - a folder that ``genodiff export`` wrote (its genodiff.json holds the run's config), or a
      folder holding a .ckpt (``last.ckpt`` when there are several);
    - a Hugging Face Hub id ``org/name[@revision]`` of a repository holding either of those
      (``genodiff.hub``; a local path of the same spelling wins).
    """
    source = hub.resolve(path, RUN_FILES)
    if source.is_dir() and (source / RUN_RECORD_FILE).is_file():
        model = _load_exported_run(source)
    else:
        model = _load_training_checkpoint(checkpoint_file(source), map_location)
    return model.to(map_location).eval()


def checkpoint_file(source: Path) -> Path:
    """``source`` when it is a file, else the training checkpoint in that folder: its
    ``last.ckpt``, or its only ``*.ckpt``."""
    if source.is_file():
        return source
    if (source / "last.ckpt").is_file():
        return source / "last.ckpt"
    found = sorted(p.name for p in source.glob("*.ckpt"))
    if len(found) == 1:
        return source / found[0]
    raise InputFileNotFoundError(
        f"{source} holds no genodiff.json (a folder from genodiff export) and "
        + (f"several checkpoints ({', '.join(found)}): name one" if found else "no *.ckpt")
    )


def _load_training_checkpoint(path: Path, map_location: str | torch.device) -> DiffusionLM:
    checkpoint = read_checkpoint(path, map_location)  # one clear error for a damaged file
    model = DiffusionLM(
        checkpoint["hyper_parameters"]["config"], tokenizer_from_checkpoint(checkpoint)
    )
    model.load_state_dict(checkpoint["state_dict"])
    return model


def _load_exported_run(folder: Path) -> DiffusionLM:
    """The run a ``genodiff export`` folder holds: its config from genodiff.json, the exported
    backbone as both the trained and the averaged weights."""
    record = json.loads((folder / RUN_RECORD_FILE).read_text())
    model = DiffusionLM(record["config"], load_tokenizer(folder))
    if any(True for _ in model.objective.parameters()):
        raise InputValueError(
            f"{folder}: the {record['config']['objective']['name']} objective has learned "
            "parameters of its own, which an exported folder does not hold; load the run's .ckpt"
        )
    weights = load_pretrained(folder).state_dict()
    model.backbone.load_state_dict(weights)
    model.eval_backbone.load_state_dict(weights)
    return model


def adamw_with_cosine(params: list[nn.Parameter], lr: float, cfg: Any, total_steps: int) -> dict:
    """AdamW (no weight decay on parameters marked ``_no_weight_decay``) with a per-step
    linear warm-up + cosine schedule, in Lightning's ``configure_optimizers`` format.

    ``cfg`` has ``betas``, ``eps``, ``weight_decay``, ``warmup_fraction``, ``min_lr_ratio``.
    """
    decay = [p for p in params if not getattr(p, "_no_weight_decay", False)]
    no_decay = [p for p in params if getattr(p, "_no_weight_decay", False)]
    optimizer = torch.optim.AdamW(
        [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr,
        betas=tuple(cfg.betas),
        eps=cfg.eps,
        weight_decay=cfg.weight_decay,
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


def trainer_kwargs(cfg: DictConfig) -> dict[str, Any]:
    """The ``trainer`` section with precision resolved: ``null`` = bf16 on GPU, fp32 on CPU."""
    kwargs = OmegaConf.to_container(cfg.trainer, resolve=True)
    # genodiff.data.base.DataModule builds every loader and places each process's rows in the
    # global batch itself; Lightning's DistributedSampler would split them again.
    kwargs["use_distributed_sampler"] = False
    if kwargs.get("precision") is None:
        on_gpu = kwargs.get("accelerator", "auto") in ("auto", "gpu", "cuda")
        on_gpu = on_gpu and torch.cuda.is_available()
        kwargs["precision"] = "bf16-mixed" if on_gpu else "32-true"
    return kwargs


class LatestCheckpoint(ModelCheckpoint):
    """The best checkpoint by ``monitor`` (``best-step<N>.ckpt``: lowest ``val/nelbo``) and a
    ``last.ckpt`` that is always the latest state: rewritten at every validation, at the end of
    training and when SIGTERM stops the run (Lightning's ``save_last`` rewrites it only in a
    step where the best checkpoint changed)."""

    def __init__(
        self,
        dirpath: Path,
        monitor: str = "val/nelbo",
        mode: str = "min",
        filename: str = "best-step{step}",
    ) -> None:
        super().__init__(
            dirpath=dirpath,
            filename=filename,
            auto_insert_metric_name=False,
            monitor=monitor,
            mode=mode,
            save_last=True,
            enable_version_counter=False,  # one run per folder: never a last-v1.ckpt
        )
        self._latest_step = -1

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_validation_end(trainer, pl_module)
        if not self._should_save_on_train_epoch_end(trainer):
            self._save_latest(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Validation once per epoch: Lightning saves the best here, after validation; the
        # latest state follows it (saved first, it would make Lightning skip this step).
        super().on_train_epoch_end(trainer, pl_module)
        if self._should_save_on_train_epoch_end(trainer):
            self._save_latest(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._save_latest(trainer)

    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        if isinstance(exception, SIGTERMException):  # pre-emption: keep the work done so far
            self._save_latest(trainer)

    def _save_latest(self, trainer: L.Trainer) -> None:
        fitting = trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking
        if fitting and not trainer.fast_dev_run and self._latest_step != trainer.global_step:
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def _save_last_checkpoint(self, trainer: L.Trainer, monitor_candidates: dict) -> None:
        super()._save_last_checkpoint(trainer, monitor_candidates)
        self._latest_step = trainer.global_step


def build_trainer(cfg: DictConfig) -> L.Trainer:
    """The run's Trainer: checkpoints (``LatestCheckpoint``, written atomically), CSV and
    TensorBoard logs under ``output_dir``."""
    out = Path(cfg.output_dir)
    # One version_<n> folder per run, so a resumed run never overwrites earlier logs.
    loggers = [
        CSVLogger(out, name="logs"),
        TensorBoardLogger(out, name="tensorboard", default_hp_metric=False),
    ]
    return L.Trainer(
        default_root_dir=out,
        logger=loggers,
        callbacks=[
            LatestCheckpoint(out / CHECKPOINT_FOLDER),
            LearningRateMonitor(logging_interval="step"),
        ],
        plugins=[AtomicCheckpointIO()],
        **trainer_kwargs(cfg),
    )
