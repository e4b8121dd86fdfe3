"""Everything about checkpoints: writing, reading, loading, exporting and describing them.

- ``io``: training checkpoints (.ckpt): atomic writes (``AtomicCheckpointIO``, Lightning's
  CheckpointIO plugin), ``read_checkpoint`` with one clear error for a damaged file,
  ``is_loadable``;
- ``folders``: Hugging-Face-format folders (config.json + model.safetensors):
  ``save_pretrained``, ``load_pretrained`` (a backbone), ``export_checkpoint`` (.ckpt -> folder),
  the layouts backbones declare;
- ``load``: ``load_model``, the trained ``GenerativeModel`` a .ckpt, an exported folder or a
  Hub id holds: the one loader of every command that uses a trained model;
- ``run_folder``: a training run's output folder: its lock, and which checkpoint it resumes;
- ``info``: ``inspect_checkpoint``, what ``genodiff info`` prints.

References may be Hugging Face Hub ids ``org/name[@revision]`` (``genodiff.hub``).
"""

from genodiff.checkpoints.folders import export_checkpoint, load_pretrained, save_pretrained
from genodiff.checkpoints.info import inspect_checkpoint
from genodiff.checkpoints.load import load_model

__all__ = [
    "export_checkpoint",
    "inspect_checkpoint",
    "load_model",
    "load_pretrained",
    "save_pretrained",
]
