"""genodiff: masked diffusion language models for DNA on Caduceus / Mamba backbones.

The public API, imported on first use (``import genodiff`` itself loads no torch, so
``genodiff --version`` stays fast)::

    model = genodiff.load("outputs/demo")      # a run folder, .ckpt, export folder or Hub id
    samples = model.generate(8, steps=128)     # Samples (of str); samples.save("samples.fa")
    model.score(samples)                       # nats per token
    model.save_pretrained("exported/demo")

    genodiff.train("configs/demo.yaml", ["trainer.max_steps=20"], output_dir="outputs/try")
    genodiff.finetune("genomic_benchmarks_demo")
    genodiff.train_classifier("classifier_demo", ["generator=outputs/conditional_demo"])
    genodiff.evaluate_samples("samples.fa", "real.fa")

docs/python_api.md walks through them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from genodiff.progress import warn_in_the_main_process_alone
from genodiff.threads import limit_spinning
from genodiff.version import __version__

# Before anything imports torch: its OpenMP threads then spin only briefly before they sleep
# while they wait (genodiff/threads.py says why and how to opt out).
limit_spinning()
# The processes a multi-process run starts run the same script or command again: each would
# show genodiff's warnings once more.
warn_in_the_main_process_alone()

if TYPE_CHECKING:
    from genodiff.classifiers import load_classifier
    from genodiff.classifiers.run import train_classifier
    from genodiff.finetuning import FinetuneResults, finetune
    from genodiff.generation_config import GenerationConfig
    from genodiff.pipeline import Model, Samples, load
    from genodiff.sample_quality import evaluate_samples
    from genodiff.training.run import train

# name -> the module that defines it
_API = {
    "load": "genodiff.pipeline",
    "Model": "genodiff.pipeline",
    "Samples": "genodiff.pipeline",
    "evaluate_samples": "genodiff.sample_quality",
    "train": "genodiff.training.run",
    "finetune": "genodiff.finetuning",
    "FinetuneResults": "genodiff.finetuning",
    "GenerationConfig": "genodiff.generation_config",
    "train_classifier": "genodiff.classifiers.run",
    "load_classifier": "genodiff.classifiers",
}

__all__ = [
    "FinetuneResults",
    "GenerationConfig",
    "Model",
    "Samples",
    "__version__",
    "evaluate_samples",
    "finetune",
    "load",
    "load_classifier",
    "train",
    "train_classifier",
]


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'genodiff' has no attribute {name!r}")
    value = getattr(import_module(_API[name]), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
