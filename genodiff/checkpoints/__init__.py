"""Everything about checkpoints: writing, reading, loading, exporting and describing them.

- ``io``: torch checkpoint files (.ckpt, .bin): the one reader of every
  torch file genodiff and its plugins load, ``read_checkpoint_file``: CRC-checked (one clear
  error for a damaged file) and ``weights_only`` with a named allow-list (OmegaConf
  configs), so no code in a file runs;
  a file that needs more is refused, or read with inert placeholders for its other classes
  (``stub_unknown_classes=True``);
- ``lightning_io``: ``AtomicCheckpointIO``, Lightning's CheckpointIO plugin: atomic writes,
  and Lightning's reads through the one reader (imported by training only);
- ``weights``: ``load_weights``, strict (one line naming what does not fit) and finite;
- ``folders``: Hugging-Face-format folders (config.json + model.safetensors):
  ``save_pretrained``, ``load_pretrained`` (a backbone), ``init_backbones`` (``init_from=``),
  the layouts backbones declare;
- ``load``: the one loader of every checkpoint genodiff writes: ``open_checkpoint`` (resolve
  a reference, read it, tell its kind: generator, guidance classifier, fine-tuned classifier;
  rebuild its tokenizer) and ``load_model``, the trained ``GenerativeModel``; the
  classifiers' builders (``genodiff.classifiers``, ``genodiff.finetuning``) sit on it too;
- ``export``: a trained model, or a training checkpoint, as a folder with its run record:
  ``export_model``, what ``Model.save_pretrained`` and ``genodiff export`` write;
- ``run_folder``: a training run's output folder: its lock, and which checkpoint it resumes;
- ``epochs``: ``reopen_cut_epoch``, the epoch a Lightning checkpoint records as a resume goes on
  with it (an epoch that ``trainer.max_steps`` ended part-way is still running), applied as
  each checkpoint is written and read;
- ``info``: ``inspect_checkpoint``, what ``genodiff info`` prints;
- ``plain``: ``plain_tree``, what a file records (a checkpoint's config, an exported folder's
  JSON) copied as a bounded tree of plain values before anything walks it.

References may be Hugging Face Hub ids ``org/name[@revision]`` (``genodiff.hub``).
"""

from genodiff.checkpoints.export import export_model
from genodiff.checkpoints.folders import init_backbones, load_pretrained, save_pretrained
from genodiff.checkpoints.info import inspect_checkpoint
from genodiff.checkpoints.io import Placeholder, UnsafePickleError, read_checkpoint_file
from genodiff.checkpoints.load import StoredCheckpoint, load_model, open_checkpoint
from genodiff.checkpoints.weights import CheckpointError, load_weights

__all__ = [
    "CheckpointError",
    "Placeholder",
    "StoredCheckpoint",
    "UnsafePickleError",
    "export_model",
    "init_backbones",
    "inspect_checkpoint",
    "load_model",
    "load_pretrained",
    "load_weights",
    "open_checkpoint",
    "read_checkpoint_file",
    "save_pretrained",
]
