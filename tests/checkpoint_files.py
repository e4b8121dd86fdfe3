"""A generative model saved as ``genodiff train`` writes its checkpoint, for the tests that
need a .ckpt without training one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from genodiff.model import GenerativeModel
from genodiff.tokenizers import CHECKPOINT_KEY
from genodiff.tokenizers.base import tokenizer_record


def save_as_trained(path: Path, model: GenerativeModel, **extra: Any) -> Path:
    """``model`` written to ``path`` with the keys genodiff reads from a training checkpoint
    (its run config, weights and tokenizer record), plus ``extra`` ones (``global_step``,
    ``epoch``); returns ``path``."""
    torch.save(
        {
            "hyper_parameters": {"config": model.config},
            "state_dict": model.state_dict(),
            CHECKPOINT_KEY: tokenizer_record(model.tokenizer),
            **extra,
        },
        path,
    )
    return path
