"""The experiment configs genodiff and its plugins ship, found by name from any folder
(``genodiff.config.resolve_config_path``) and listed by ``genodiff train --help``.

Light on purpose (PyYAML's reader, with libyaml's C parser where it is built; no OmegaConf,
Hydra or torch): the CLI reads the configs only when a help asks for them, and answers at once.
"""

from __future__ import annotations

from pathlib import Path

from genodiff import registry
from genodiff.resources import resource


def config_folders() -> list[Path]:
    """The folders experiment files and config groups are found in: the core's
    (``genodiff.resources``), then each plugin's (entry-point group ``genodiff.configs``)."""
    return [resource("configs"), *registry.plugin_config_folders()]


def experiment_files() -> dict[str, Path]:
    """Each shipped experiment (a YAML file directly in a config folder; the subfolders hold
    config groups) by name; a name in an earlier folder hides a later one, as in
    ``resolve_config_path``."""
    files: dict[str, Path] = {}
    for folder in config_folders():
        for file in sorted(folder.glob("*.yaml")):
            files.setdefault(file.stem, file)
    return files


def selects_group(name: str, group: str, files: dict[str, Path]) -> bool:
    """Whether experiment ``name``'s defaults list, or a parent experiment's it names, picks a
    config of ``group`` (``objective: mdlm``, ``override objective: ar``)."""
    for entry in _defaults_list(files[name]):
        if isinstance(entry, dict) and any(key.split()[-1] == group for key in entry):
            return True
        parent = isinstance(entry, str) and entry in files and entry != name
        if parent and selects_group(entry, group, files):
            return True
    return False


def _defaults_list(file: Path) -> list:
    """The ``defaults:`` list of an experiment file (empty where it has none)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C parser: ~50x faster
    return (yaml.load(file.read_text(encoding="utf-8"), Loader=loader) or {}).get("defaults") or []


def training_configs() -> list[str]:
    """The shipped experiments ``genodiff train`` takes: those that pick a training
    ``objective`` (fine-tuning and classifier configs pick none)."""
    files = experiment_files()
    return [name for name in files if selects_group(name, "objective", files)]
