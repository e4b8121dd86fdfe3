"""Models by name: trained models that ship with genodiff, and folders of them the user adds.

A named model is an export folder (``genodiff export``: ``config.json``, ``model.safetensors``,
``genodiff.json``, ``tokenizer.json``) plus its model card, ``README.md``, whose YAML front
matter (between ``---`` lines, as on the Hugging Face Hub) holds at least ``summary`` (one
line) and ``license``. Its name is its folder's name (printable, not starting with ``.``:
``.x`` is a path). They are looked for in:

1. the folders of ``GENODIFF_MODELS_PATH`` (``os.pathsep``-separated; a lab's shared models),
   in order;
2. ``models/`` of this install (the repository's top-level ``models/`` in a checkout, the
   wheel's bundled copy once installed: ``genodiff.resources``).

Every place that takes a checkpoint takes a name (``genodiff.hub.resolve``): ``genodiff.load``,
``genodiff sample/eval --checkpoint``, ``finetune pretrained=``, ``init_from=``. A file or
folder of the same spelling in the working directory wins over a name (with a warning naming
both), a name over a Hub id.
Nothing is downloaded: the weights are on disk. ``genodiff models`` lists them (name first),
``genodiff models NAME`` prints the card.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from genodiff.errors import InputKeyError, InputValueError
from genodiff.resources import resource
from genodiff.user_warnings import warn_user

MODELS_ENV = "GENODIFF_MODELS_PATH"
CARD = "README.md"
REQUIRED_FILES = ("config.json", "model.safetensors")
CARD_LIMIT = 1 << 16  # bytes of a card read: a card is text, not data


@dataclass(frozen=True)
class NamedModel:
    """A model found by name: its ``folder`` and its card's front matter."""

    name: str
    folder: Path
    summary: str
    license: str

    def card(self) -> str:
        """The model card's text (at most ``CARD_LIMIT`` bytes of it); InputValueError when
        it cannot be read."""
        try:
            return _read_card(self.folder)
        except OSError as err:
            why = _unreadable(err, self.folder / CARD)
            raise InputValueError(f"{why}: make it readable to see the card") from err


def model_lines(models: Iterable[NamedModel], width: int | None = None) -> list[str]:
    """``NAME  SUMMARY  licence: LICENCE``, one line per model (``genodiff models``), its name
    first, the summaries and the licences each starting in one column: the names and the
    summaries are padded to the longest of them. LICENCE is the card's licence up to its first
    ``;``: the weights' (a card's licence reads ``weights LICENCE; data: ...``; the card holds
    all of it). ``width``: the columns a line may take (a terminal's; None: no limit): where a
    line is longer, the licences are left out, and a summary still too long is cut to fit,
    ending in ``…`` (never within the name)."""
    models = list(models)
    if not models:
        return []
    name_width = max(len(m.name) for m in models)
    summary_width = max(len(m.summary) for m in models)
    rows = [(f"{m.name:<{name_width}}  {m.summary:<{summary_width}}", m) for m in models]
    lines = [f"{row}  licence: {m.license.split(';')[0].strip()}" for row, m in rows]
    if width is None or all(len(line) <= width for line in lines):
        return lines
    width = max(width, name_width + 3)  # the name, two spaces and the "…" at the least
    cut = [row.rstrip() for row, _ in rows]
    return [line if len(line) <= width else line[: width - 1] + "…" for line in cut]


def model_folders() -> list[Path]:
    """The folders searched for named models, in order (``GENODIFF_MODELS_PATH``'s, then this
    install's ``models/``)."""
    given = [Path(p).expanduser() for p in os.environ.get(MODELS_ENV, "").split(os.pathsep) if p]
    return [*given, resource("models")]


def named_models() -> dict[str, NamedModel]:
    """Every named model by name; a name found in two folders is the first folder's. A folder
    or entry that cannot be read is left out with a warning saying so (the others still
    load)."""
    found: dict[str, NamedModel] = {}
    for root in model_folders():
        for folder in _entries(root):
            if folder.name not in found and _is_name(folder.name) and _is_model(folder):
                found[folder.name] = _described(folder)
    return found


def _is_name(text: str) -> bool:
    """Whether ``text`` can name a model: a folder's name, not hidden (``.x``, ``..``: paths,
    not names) and printable (a name is typed, and listed on one line)."""
    paths = text.startswith(".") or "/" in text or os.sep in text
    return bool(text) and text.isprintable() and not paths


def named_model(name: str) -> NamedModel:
    """The model called ``name``; InputKeyError listing the names there are."""
    models = named_models()
    if name not in models:
        known = ", ".join(models) or f"none (no models ship yet; set {MODELS_ENV} to add some)"
        raise InputKeyError(
            f"no model named {name!r}{incomplete_model(name)}; the named models: {known}"
        )
    return models[name]


def incomplete_model(name: str) -> str:
    """``, but FOLDER lacks FILE``, where a folder of models holds a folder called ``name``
    that is no model for a missing required file (a model copied in part); "" otherwise."""
    if not _is_name(name):
        return ""
    for root in model_folders():
        folder = root / name
        try:
            if not folder.is_dir():
                continue
            missing = [file for file in REQUIRED_FILES if not (folder / file).is_file()]
            if missing:
                return (
                    f", but {folder} lacks {' and '.join(missing)} (a named model is a "
                    f"genodiff export folder: copy it whole)"
                )
        except OSError:  # an unreadable folder is said by the listing's own warning
            continue
    return ""


def named_model_folder(reference: str | os.PathLike) -> Path | None:
    """The folder of the named model ``reference`` spells, None when it names none (a path
    with a separator, or an unknown name)."""
    text = str(reference)
    if not _is_name(text):
        return None
    model = named_models().get(text)
    return model.folder if model is not None else None


def close_names(reference: str | os.PathLike) -> list[str]:
    """The named models whose names are spelled close to ``reference`` (case aside), closest
    first: what a mistyped name probably meant."""
    names = {name.lower(): name for name in named_models()}
    close = difflib.get_close_matches(str(reference).lower(), names, n=3, cutoff=0.75)
    return [names[name] for name in close]


def _entries(root: Path) -> list[Path]:
    """The entries of the models folder ``root``, sorted; none where it is missing, and none
    with a warning saying why where it cannot be read, or is a file or a model's own folder
    (a folder of models is wanted: ``root`` is most likely a mistyped entry)."""
    try:
        if not root.is_dir():
            if root.exists():
                _warn_not_a_models_folder(root, "which is no folder: name a folder of models")
            return []
        entries = sorted(root.iterdir())
    except OSError as err:
        _warn_unreadable(err, root, f"take it out of {MODELS_ENV}")
        return []
    if set(REQUIRED_FILES) <= {entry.name for entry in entries}:
        _warn_not_a_models_folder(root, "a model's own folder: name the folder it lies in")
        return []
    return entries


def _warn_not_a_models_folder(root: Path, why: str) -> None:
    warn_user(f"{MODELS_ENV} names {root}, {why}")


def _is_model(folder: Path) -> bool:
    try:
        return folder.is_dir() and all((folder / name).is_file() for name in REQUIRED_FILES)
    except OSError as err:  # PermissionError, a name too long: not a folder to pass silently
        _warn_unreadable(err, folder, f"move it out of {folder.parent}")
        return False


def _unreadable(err: OSError, path: Path) -> str:
    return f"{path} cannot be read ({err.strerror or err})"


def _warn_unreadable(err: OSError, path: Path, fix: str) -> None:
    """A warning that the models folder or model folder ``path`` is left out, and ``fix``."""
    warn_user(
        f"{_unreadable(err, path)}, so the named models in it are left out: make it "
        f"readable, or {fix}"
    )


# Control characters but tab and newline (C0, DEL, C1): a card's text reaches the terminal
# (``genodiff models``), where an escape sequence from a shared folder's card would act.
_CONTROLS = {c: "\ufffd" for c in [*range(0x20), *range(0x7F, 0xA0)] if chr(c) not in "\t\n"}


def _read_card(folder: Path) -> str:
    """The first ``CARD_LIMIT`` bytes of the folder's model card as text, its line ends as
    newlines and other control characters (but tab) shown as U+FFFD; "" when it has none."""
    path = folder / CARD
    if not path.is_file():
        return ""
    with path.open("rb") as card:
        text = card.read(CARD_LIMIT).decode("utf-8", errors="replace")
    return text.replace("\r\n", "\n").translate(_CONTROLS)  # a card written on Windows too


def front_matter(card: str) -> dict[str, str]:
    """The ``key: value`` lines between a card's opening and closing ``---`` lines (flat
    strings only: a card's metadata is read, never evaluated)."""
    lines = card.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    fields: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() == "---":
            return fields
        key, sep, value = line.partition(":")
        if sep and key.strip() and not line[0].isspace():
            fields[key.strip()] = value.strip().strip("'\"")
    return {}  # no closing line: no front matter


def _described(folder: Path) -> NamedModel:
    try:
        fields = front_matter(_read_card(folder))
    except OSError as err:  # the model is still listed, and loads: only its card is not read
        fields = {"summary": f"(model card unreadable: {err.strerror or err})"}
    return NamedModel(
        folder.name,
        folder.resolve(),
        fields.get("summary", "(no model card)"),
        fields.get("license", "not stated"),
    )
