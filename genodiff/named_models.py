"""Models by name: trained models that ship with genodiff, and folders of them the user adds.

A named model is an export folder (``genodiff export``: ``config.json``, ``model.safetensors``,
``genodiff.json``, ``tokenizer.json``) plus its model card, ``README.md``, whose YAML front
matter (between ``---`` lines, as on the Hugging Face Hub) holds at least ``summary`` (one
line) and ``license``. Its name is its folder's name. They are looked for in:

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

from genodiff.errors import InputKeyError
from genodiff.resources import resource

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
        """The model card's text (at most ``CARD_LIMIT`` bytes of it)."""
        return _read_card(self.folder)


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
    """Every named model by name; a name found in two folders is the first folder's."""
    found: dict[str, NamedModel] = {}
    for root in model_folders():
        if not root.is_dir():
            continue
        for folder in sorted(root.iterdir()):
            if folder.name not in found and _is_model(folder):
                found[folder.name] = _described(folder)
    return found


def named_model(name: str) -> NamedModel:
    """The model called ``name``; InputKeyError listing the names there are."""
    models = named_models()
    if name not in models:
        known = ", ".join(models) or f"none (no models ship yet; set {MODELS_ENV} to add some)"
        raise InputKeyError(f"no model named {name!r}; the named models: {known}")
    return models[name]


def named_model_folder(reference: str | os.PathLike) -> Path | None:
    """The folder of the named model ``reference`` spells, None when it names none (a path
    with a separator, or an unknown name)."""
    text = str(reference)
    if not text or os.sep in text or "/" in text or text.startswith("."):
        return None
    model = named_models().get(text)
    return model.folder if model is not None else None


def close_names(reference: str | os.PathLike) -> list[str]:
    """The named models whose names are spelled close to ``reference`` (case aside), closest
    first: what a mistyped name probably meant."""
    names = {name.lower(): name for name in named_models()}
    close = difflib.get_close_matches(str(reference).lower(), names, n=3, cutoff=0.75)
    return [names[name] for name in close]


def _is_model(folder: Path) -> bool:
    return folder.is_dir() and all((folder / name).is_file() for name in REQUIRED_FILES)


def _read_card(folder: Path) -> str:
    path = folder / CARD
    if not path.is_file():
        return ""
    with path.open("rb") as card:
        return card.read(CARD_LIMIT).decode("utf-8", errors="replace")


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
    fields = front_matter(_read_card(folder))
    return NamedModel(
        folder.name,
        folder.resolve(),
        fields.get("summary", "(no model card)"),
        fields.get("license", "not stated"),
    )
