"""Hugging-Face-format checkpoint folders: ``config.json`` + ``model.safetensors``.

Folders use the upstream projects' config fields and state-dict names, so they interchange with
them. Each backbone declares its layouts (``genodiff.backbones.layout``); this module names no
model class, so plugin backbones save, load and export the same way. Built in:

- Caduceus (``"model_type": "caduceus"``): keys ``caduceus.backbone.*``, ``lm_head.*`` (PS).
- mamba_ssm ``MambaLMHeadModel`` (MambaConfig fields, no model_type): keys ``backbone.*``.
- HyenaDNA (a ``layer`` dict with the Hyena settings): keys ``backbone.*``.
- Read only: Hugging Face transformers' ``MambaForCausalLM`` (``"model_type": "mamba"``).

Weights are read from ``model.safetensors``, ``pytorch_model.bin`` or HyenaDNA's original
``weights.ckpt`` (a Lightning checkpoint, keys ``model.backbone.*``). The two torch files are
pickles: they are read by ``genodiff.checkpoints.io.read_checkpoint_file``, which unpickles
tensors, plain containers and the OmegaConf config a HyenaDNA checkpoint holds, and refuses
anything else unless the caller passes ``stub_unknown_classes=True`` (which reads other
classes as inert placeholders: no code from the file runs either way). Tied tensors are stored
once and re-tied on load (``genodiff.checkpoints.weights.load_weights``). ``init_backbones``
copies a folder's weights into a backbone built from a run's config (``init_from=``).

Saving follows the Hugging Face convention: the target folder may exist and hold other files.
The files genodiff writes (``OWNED_FILES``: config.json, model.safetensors, tokenizer.json,
genodiff.json) make up the saved model: ``overwrite`` replaces all of them, deleting those the
new save does not write (a backbone saved over an export loses the export's genodiff.json, so
the folder never pairs one model's weights with another's run record), each new one written
beside its target and flushed, then renamed over it; nothing else is deleted (a README, a
Hub clone's .git, an upstream pytorch_model.bin, which genodiff never writes and never reads
while a model.safetensors is there). Every load entry point also takes a Hub id
``org/name[@revision]`` (``genodiff.hub``).

Vocabulary: config.json may give the raw vocabulary (HyenaDNA: 12) or the padded one
(Caduceus: 16); both build the padded model because vocab_size is rounded up to a multiple of
pad_vocab_size_multiple. Written folders always hold the padded size.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
from omegaconf import OmegaConf
from torch import nn

from genodiff import hub, registry
from genodiff.atomic_files import check_writable, disk_full_error, fsync_path, temporary_path
from genodiff.backbones.build import CONFIG_ATTR, build
from genodiff.backbones.layout import CheckpointLayout, constructor_defaults, layouts_of
from genodiff.checkpoints.io import (
    DamagedFileError,
    read_checkpoint_file,
)
from genodiff.checkpoints.weights import (
    CheckpointError,
    drop_tied_copies,
    load_weights,
    storage_key,
)
from genodiff.conditioning import ConditioningConfig
from genodiff.config import (
    ConfigError,
    RunConfig,
    SamplesConfig,
    backbone_differences,
    dataclass_keys,
    section_kind,
    section_spec,
)
from genodiff.errors import (
    InputFileExistsError,
    InputFileNotFoundError,
    InputValueError,
    require_flag,
    require_output_path,
)
from genodiff.plain_records import read_json_object
from genodiff.randomness.kept import global_random_state_kept
from genodiff.tokenizers import (
    TOKENIZER_FILE,
    Tokenizer,
    tokenizer_record,
)
from genodiff.user_warnings import warn_user
from genodiff.version import __version__

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
# Looked for in this order.
WEIGHT_FILES = (WEIGHTS_FILE, "pytorch_model.bin", "weights.ckpt")
# What a folder may hold that ``load_pretrained`` reads (all a Hub download fetches).
FOLDER_FILES = (CONFIG_FILE, TOKENIZER_FILE, *WEIGHT_FILES)
# Written by ``genodiff.checkpoints.export`` beside the backbone files: the run's config, step
# and which weights were exported, so the folder can be sampled and evaluated like the .ckpt.
RUN_RECORD_FILE = "genodiff.json"
# What a save writes, all a saved model is: ``overwrite`` replaces these and only these.
OWNED_FILES = (CONFIG_FILE, WEIGHTS_FILE, TOKENIZER_FILE, RUN_RECORD_FILE)
# The sections of a run's config that say what its weights are (required on loading).
RUN_SECTIONS = ("model", "objective")
# The sections checked against the class each names when a run's config is read: the weights'
# and, where the run has one, the data it read (what ``score``, ``windows`` and ``eval`` build).
CHECKED_SECTIONS = (*RUN_SECTIONS, "data")
# The top-level keys of a run's config this version writes and reads.
_RUN_KEYS = frozenset(dataclass_keys(RunConfig))

# model.safetensors metadata key: the checksum of the tensors written (``tensors_digest``),
# compared when the folder is read, so weights changed after writing are found.
DIGEST_KEY = "genodiff_crc32"

# Writes one file at the path it is given.
FileWriter = Callable[[Path], None]


# ----------------------------------------------------------------------------- saving


def save_pretrained(
    model: nn.Module,
    directory: str | Path,
    config: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    tokenizer: Tokenizer | None = None,
) -> Path:
    """Write ``model`` into ``directory`` as config.json + model.safetensors (+ tokenizer.json
    when ``tokenizer`` is given); returns the folder.

    ``config`` is the backbone's genodiff config (``name`` optional); by default the one that
    ``genodiff.backbones.build`` recorded on the model. The layout is the first writable one
    the model's class declares (``checkpoint_layouts``). ``directory`` may exist and hold other
    files, which are kept; a model saved there before (any of ``OWNED_FILES``) is replaced,
    all of it, only with ``overwrite=True`` (see ``_write_folder``).
    """
    overwrite = require_flag(overwrite, "overwrite")
    return _write_folder(
        output_folder(directory), _folder_files(model, config, tokenizer), overwrite
    )


def output_folder(directory: str | os.PathLike) -> Path:
    """``directory`` as the folder a model is saved into, ``~`` expanded as ``genodiff.load``
    expands it; InputValueError for a value that is no path, and for an empty name, which
    ``Path`` would read as the working directory (``genodiff.load`` refuses it too)."""
    path = require_output_path(directory, "the output folder")
    if os.fspath(directory) == "":
        raise InputValueError(
            'the output folder is an empty name; name a folder ("." for the working directory)',
            parameter="out",
        )
    return path


def _folder_files(
    model: nn.Module, config: Mapping[str, Any] | None, tokenizer: Tokenizer | None
) -> dict[str, FileWriter]:
    """The writers of the files a checkpoint folder of ``model`` holds, config.json last."""
    layout = _writable_layout(model)
    full = {**constructor_defaults(type(model).__init__), **_recorded_config(model, config)}
    reference = layout.write_config(model, full)
    tensors = {layout.to_reference(name): t for name, t in _unique_tensors(model).items()}

    def write_weights(path: Path) -> None:
        metadata = {"format": "pt", DIGEST_KEY: tensors_digest(tensors)}
        # Written by Python, not safetensors' save_file: a full disk is then an OSError
        # (errno ENOSPC), which _write_folder reports, rather than a SafetensorError.
        path.write_bytes(safetensors.torch.save(tensors, metadata=metadata))

    files = {WEIGHTS_FILE: write_weights}
    if tokenizer is not None:
        files[TOKENIZER_FILE] = _json_writer(tokenizer_record(tokenizer))
    files[CONFIG_FILE] = _json_writer(reference)
    return files


def _json_writer(content: Any) -> FileWriter:
    return lambda path: path.write_text(json.dumps(content, indent=2) + "\n")


def _writable_layout(model: nn.Module) -> CheckpointLayout:
    for layout in layouts_of(type(model)):
        if layout.write_config is not None:
            return layout
    raise TypeError(
        f"{type(model).__name__} declares no writable checkpoint layout (checkpoint_layouts); "
        "see genodiff.backbones.layout.CheckpointLayout"
    )


def _recorded_config(model: nn.Module, config: Mapping[str, Any] | None) -> dict[str, Any]:
    config = config if config is not None else getattr(model, CONFIG_ATTR, None)
    if config is None:
        raise TypeError(
            f"{type(model).__name__} has no recorded config: build it with "
            "genodiff.backbones.build(name, **config) or pass config= to save_pretrained"
        )
    return {k: v for k, v in config.items() if k != "name"}


def _unique_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """The state dict with each shared tensor kept once, under its first name."""
    seen: set[tuple] = set()
    unique = {}
    for name, tensor in model.state_dict().items():
        key = storage_key(tensor)
        if key not in seen:
            seen.add(key)
            unique[name] = tensor.detach().contiguous()
    return unique


def _write_folder(directory: Path, files: dict[str, FileWriter], overwrite: bool) -> Path:
    """Write ``files`` (name -> writer, each one of ``OWNED_FILES``) into ``directory``,
    creating it if needed, in place of the model saved there before.

    Each file is written under its temporary name in ``directory``
    (``genodiff.atomic_files.temporary_path``) and flushed to disk; only when all of them are
    written are the earlier save's files that this one does not write deleted and the new ones
    renamed over their final names, so a failed write changes nothing (the folders this call
    created, ``directory`` and any above it, are removed again; a full disk is a
    ``DiskFullError`` naming the file), and the folder never holds files of two saves (a kill
    in the instant of the renames aside, which leaves a folder that loads as the old model or
    fails to load). Files not in ``OWNED_FILES`` are never touched. Without ``overwrite`` a
    folder holding any of ``OWNED_FILES`` is an error; a ``directory`` that cannot be written
    (a file above it, a read-only file system) is one before anything is written.
    """
    saved = sorted(name for name in OWNED_FILES if (directory / name).exists())
    if saved and not overwrite:
        raise InputFileExistsError(
            f"{', '.join(saved)} already exist in {directory}: choose another folder, or "
            "overwrite them (other files there are kept)",
            parameter="overwrite",
        )
    check_writable(directory / CONFIG_FILE, "out")  # a file above it, a read-only folder
    created = _missing_folders(directory)
    directory.mkdir(parents=True, exist_ok=True)
    staged: dict[str, Path] = {}
    try:
        for name, write in files.items():
            staged[name] = tmp = temporary_path(directory / name)
            tmp.unlink(missing_ok=True)  # left by a killed writer whose pid was this one
            tmp.touch(exist_ok=False)  # with the usual permissions (umask) ...
            mode = stat.S_IMODE(tmp.stat().st_mode)
            write(tmp)
            tmp.chmod(mode)  # ... which some writers drop (safetensors: owner-only)
            fsync_path(tmp)
    except BaseException as err:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)
        full = disk_full_error(err, directory / name, existed=(directory / name).exists())
        for folder in created:  # deepest first; one another process wrote into stays
            with contextlib.suppress(OSError):
                folder.rmdir()
        if full is not None:
            raise full from err
        raise
    for name in saved:
        if name not in files:  # the earlier save's, which this one does not replace
            (directory / name).unlink()
    for name, tmp in staged.items():
        os.replace(tmp, directory / name)
    fsync_path(directory)  # the renames themselves
    return directory


def _missing_folders(directory: Path) -> list[Path]:
    """``directory`` and the folders above it that do not exist yet, deepest first: what
    creating it creates."""
    missing = []
    for folder in (directory, *directory.parents):
        if folder.exists():
            break
        missing.append(folder)
    return missing


# ----------------------------------------------------------------------------- loading


@global_random_state_kept()  # building the module draws its discarded initial weights
def load_pretrained(
    directory: str | Path, *, stub_unknown_classes: bool = False, **overrides: Any
) -> nn.Module:
    """The genodiff backbone stored in a checkpoint folder, in eval mode.

    ``directory`` is a local folder or a Hugging Face Hub id ``org/name[@revision]``
    (``kuleshov-group/caduceus-ph_seqlen-131k_d_model-256_n_layer-16``), fetched into the
    Hugging Face cache on first use (``genodiff.hub``; a local folder of that name wins).

    The layout is recognised from config.json among those every registered backbone
    declares (built-in: Caduceus, mamba_ssm, HyenaDNA, transformers' Mamba; plugins add
    theirs); ``overrides`` replace fields of the genodiff config built from it (e.g.
    ``fused_add_norm=False``). Weights load strictly: only known redundant copies of tied
    tensors may be absent or extra; anything else raises ``CheckpointError``, and weights
    holding a NaN or an infinity are refused too. The folder's tokenizer, if it has one, is
    read with ``genodiff.tokenizers.load_tokenizer``.

    A ``pytorch_model.bin`` or ``weights.ckpt`` that needs more than tensors, plain values and
    an OmegaConf config to be unpickled is refused (``UnsafePickleError``);
    ``stub_unknown_classes=True`` reads those other classes as inert placeholders
    (``genodiff.checkpoints.Placeholder``) and takes the weights: no code from the file runs.

    The global random states are as they were before the call (``genodiff.randomness.kept``),
    so ``init_from=`` and ``pretrained=`` leave a seeded run's draws as they are without them.
    """
    directory = hub.resolve(directory, FOLDER_FILES)
    backbone, layout, config = read_backbone_config(directory)
    model = build(backbone, **{**config, **overrides})
    weights = _weights_file(directory)
    stored = _read_weights(weights, stub_unknown_classes)
    source = f"{weights} (read as the {layout.name} layout)"
    state = {layout.to_genodiff(k): t for k, t in stored.items()}
    state = drop_tied_copies(state, model.state_dict().keys(), layout.tied_copy_of, source)
    load_weights(model, state, source)
    return model.eval()


def init_backbones(
    backbones: Sequence[nn.Module], reference: str | Path, *, stub_unknown_classes: bool = False
) -> None:
    """Copy the weights of a Hugging-Face-format folder (``genodiff export``, a Caduceus MLM,
    a mamba_ssm or HyenaDNA release), or of a Hub id ``org/name[@revision]`` holding one, into
    each of ``backbones`` (``init_from=``: a model's backbone and its average's), read once;
    every tensor must fit: a ``CheckpointError`` names those that do not, after the settings in
    which the two backbones' configs differ, where they record theirs. ``stub_unknown_classes``
    as for ``load_pretrained``."""
    pretrained = load_pretrained(reference, stub_unknown_classes=stub_unknown_classes)
    weights = pretrained.state_dict()
    for backbone in backbones:
        try:
            load_weights(backbone, weights, f"init_from={reference}")
        except CheckpointError as err:
            ours, theirs = (getattr(m, CONFIG_ATTR, None) or {} for m in (backbone, pretrained))
            differences = backbone_differences(
                ours, theirs, ("in the model config", "in the folder")
            )
            said = f"{'; '.join(differences)}; " if differences else ""  # the shapes' cause
            raise CheckpointError(
                f"{said}{err}. Pick the model config that matches the folder's config.json"
            ) from None


def read_backbone_config(directory: Path) -> tuple[str, CheckpointLayout, dict[str, Any]]:
    """The config.json of a checkpoint folder: the backbone and layout it matches
    (``detect_layout``) and the genodiff config read from it, checked against what the
    backbone's class takes (``check_run_config``: an input error naming the file for a field
    of another type, such as ``"n_layer": "two"``)."""
    path = directory / CONFIG_FILE
    if not path.is_file():
        raise InputFileNotFoundError(f"{directory} is not a checkpoint folder: no {CONFIG_FILE}")
    reference = read_json_object(path)
    backbone, layout = detect_layout(reference, directory)
    config = layout.read_config(reference)
    check_run_config({"model": {"name": backbone, **config}}, path, "restore the file")
    return backbone, layout, config


def read_run_record(folder: Path) -> dict[str, Any]:
    """The genodiff.json of an exported folder: the run's config, step and weights. An input
    error naming the file when it is malformed, or when the model and objective its config
    records are not what the classes they name take (``check_run_config``)."""
    path = folder / RUN_RECORD_FILE
    record = read_json_object(path)
    config = record.get("config")
    if not isinstance(config, dict) or not all(
        isinstance(config.get(s), dict) for s in RUN_SECTIONS
    ):
        raise InputValueError(
            f"{path} is inconsistent: it records no run config with model and objective "
            "sections; export the folder again from the run's .ckpt"
        )
    check_run_config(config, path, "export the folder again from the run's .ckpt")
    return record


def check_run_config(config: Mapping[str, Any], source: str | Path, remedy: str) -> None:
    """An input error naming ``source`` (and saying ``remedy``) when a section of
    ``CHECKED_SECTIONS`` that a run's recorded ``config`` holds is not what the class it names
    takes (edited, or written for another class; the class unknown; not a mapping): loading
    it would build something else, or nothing. Keys this version does not know elsewhere are
    a warning (``_warn_of_unknown_keys``)."""
    _warn_of_unknown_keys(config, source)
    for section in CHECKED_SECTIONS:
        if section in config and not isinstance(config[section], dict):
            raise InputValueError(
                f"{source} is inconsistent: config.{section} is a "
                f"{type(config[section]).__name__}, not a section of keys; {remedy}"
            )
    present = {s: config[s] for s in CHECKED_SECTIONS if isinstance(config.get(s), dict)}
    _require_installed_classes(present, source)
    cfg = OmegaConf.create(present)  # plain values: nothing in it is resolved (plain_tree)
    for section, values in present.items():
        try:
            if section == "objective":  # as this version names it (an older run's, too)
                values = _current_objective_options(values)
            section_spec(cfg, section).check(section, values)
        except (ConfigError, InputValueError) as err:
            raise InputValueError(
                f"{source} is inconsistent (config.{section}.name is {values.get('name')!r}): "
                f"{err}; {remedy}"
            ) from None


def _require_installed_classes(sections: Mapping[str, Any], source: str | Path) -> None:
    """An input error naming ``source`` when a section names a class that no installed code
    provides: a run made with a plugin that is not installed here (the file itself is fine,
    so the error says to install the plugin, not to restore the file)."""
    for section, values in sections.items():
        name = values.get("name")
        if not isinstance(name, str):
            continue  # a missing or non-string name: the section check says so
        registry.get_recorded(section_kind(section), name, source, f"config.{section}.name")


def _warn_of_unknown_keys(config: Mapping[str, Any], source: str | Path) -> None:
    """A warning naming the keys of a run's recorded ``config`` that this version of genodiff
    does not know, at its top level and in the sections that change what a loaded model does
    (``samples:``, its generation config; ``conditioning:``): they are ignored, so a model
    that another version saved with them would generate otherwise, silently. The training-only
    sections (``optim``, ``ema``, ``trainer``: Lightning's keys) do not matter on loading."""
    unknown = [str(key) for key in config if key not in _RUN_KEYS]
    for section, cls in (("samples", SamplesConfig), ("conditioning", ConditioningConfig)):
        values = config.get(section)
        if isinstance(values, Mapping):
            known = dataclass_keys(cls)
            unknown += [f"{section}.{key}" for key in values if key not in known]
    if unknown:
        warn_user(
            f"{source} sets {', '.join(unknown)}, which genodiff {__version__} does not know "
            "(saved by another version?): ignored; install the version that saved it to use "
            "them"
        )


def _current_objective_options(section: dict[str, Any]) -> dict[str, Any]:
    """A saved objective section with an earlier version's option names translated
    (``Objective.current_options``); as it is when its objective is unknown (the check of the
    section says so)."""
    try:
        objective = registry.get("objective", section.get("name"))
    except KeyError:
        return section
    return objective.current_options(section)


def registered_layouts(plugins: bool = True) -> list[tuple[str, CheckpointLayout]]:
    """(backbone name, layout) for every layout every registered backbone declares: the
    built-ins', and with ``plugins`` every plugin backbone's too (importing each plugin)."""
    return [
        (name, layout)
        for name, cls in sorted(registry.available("backbone", plugins).items())
        for layout in layouts_of(cls)
    ]


def detect_layout(
    config: Mapping[str, Any], source: str | Path = "config"
) -> tuple[str, CheckpointLayout]:
    """The (backbone name, layout) whose ``matches`` accepts a config.json; exactly one must.
    The built-in layouts are tried first, so that a config of a built-in backbone (every model
    genodiff ships) loads without importing any plugin: a broken plugin cannot block it."""
    for plugins in (False, True):
        found = [(name, lay) for name, lay in registered_layouts(plugins) if lay.matches(config)]
        if len(found) == 1:
            return found[0]
        if found:
            names = ", ".join(layout.name for _, layout in found)
            raise CheckpointError(f"{source}: config.json matches several layouts: {names}")
    known = ", ".join(layout.name for _, layout in registered_layouts())
    raise CheckpointError(
        f"{source}: config.json matches no known layout ({known}); its fields: "
        f"{', '.join(sorted(map(str, config))) or '(none)'}. {registry.plugin_hint('backbone')}"
    )


def _weights_file(directory: Path) -> Path:
    for name in WEIGHT_FILES:
        if (directory / name).is_file():
            return directory / name
    raise InputFileNotFoundError(f"{directory} holds no weights: none of {', '.join(WEIGHT_FILES)}")


def tensors_digest(tensors: Mapping[str, torch.Tensor]) -> str:
    """CRC-32 (as 8 hex digits) over every tensor's name, dtype, shape and bytes, in name
    order: the check a zip archive (a .ckpt) keeps per member, for the damage of bytes on a
    disk or in a copy, at about a gigabyte a second."""
    crc = 0
    for name in sorted(tensors):
        tensor = tensors[name].detach().cpu().contiguous()
        crc = zlib.crc32(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode(), crc)
        crc = zlib.crc32(tensor.reshape(-1).view(torch.uint8).numpy(), crc)
    return f"{crc:08x}"


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of ``path``; DamagedFileError when the file cannot be parsed or its tensors
    differ from the digest recorded when it was written (folders written before genodiff
    recorded one, or by other tools, are read unchecked)."""

    def damaged(why: str) -> DamagedFileError:
        advice = "use another checkpoint, e.g. the previous one, or export or download it again"
        return DamagedFileError(
            f"{path} is damaged: its bytes changed after it was written ({why}); "
            f"{hub.redownload_advice(path, advice)}"
        )

    try:
        with safetensors.safe_open(str(path), framework="pt") as handle:
            recorded = (handle.metadata() or {}).get(DIGEST_KEY)
        tensors = safetensors.torch.load_file(str(path))
    except safetensors.SafetensorError as err:
        raise damaged(_first_line(err)) from None
    if recorded is not None and tensors_digest(tensors) != recorded:
        raise damaged("the weights differ from their recorded digest")
    return tensors


def _first_line(err: Exception) -> str:
    return (str(err).splitlines() or [type(err).__name__])[0][:160]


def _read_weights(path: Path, stub_unknown_classes: bool) -> dict[str, torch.Tensor]:
    """The tensors of a folder's weights file, by their stored names (a Lightning
    checkpoint's ``model.`` prefix removed); torch files through the safe reader."""
    if path.suffix == ".safetensors":
        return _read_safetensors(path)
    content = read_checkpoint_file(path, stub_unknown_classes=stub_unknown_classes)
    if path.suffix == ".bin":
        return content
    # HyenaDNA's original Lightning checkpoint: the model's keys under "model."
    state = content.get("state_dict") if isinstance(content, Mapping) else None
    if not isinstance(state, Mapping):
        raise CheckpointError(f"{path} holds no state_dict: it is not a Lightning checkpoint")
    return {k.removeprefix("model."): t for k, t in state.items() if k.startswith("model.")}


# ----------------------------------------------------------------------------- export


def as_trained(model_config: dict[str, Any], run_config: Mapping[str, Any]) -> dict[str, Any]:
    """``model_config`` with what the run did: a backbone whose ``time_conditioning``
    defaults to true (the text plugin's DiT) trained by an objective without time
    conditioning only ever read sigma = 0, so it is exported as ``time_conditioning: false``,
    not as its constructor default. A backbone whose default is false (Caduceus) keeps what
    its config says: its time embedding exists only when asked for, and the weights must fit."""
    cls = registry.get("backbone", model_config["name"])
    defaults_on = constructor_defaults(cls.__init__).get("time_conditioning") is True
    conditioned = bool((run_config.get("objective") or {}).get("time_conditioning", False))
    if defaults_on and not conditioned:
        return {**model_config, "time_conditioning": False}
    return model_config
