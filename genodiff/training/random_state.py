"""Random state that a resumed run must restore to draw what an uninterrupted run would."""

from __future__ import annotations

from typing import Any

import lightning as L
import numpy as np
import torch

# Where a training checkpoint keeps the global torch RNG states (the objective's noise draws
# and dropout use them), so that a resumed run draws what an uninterrupted one would.
RNG_KEY = "genodiff_rng"


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
