"""Files the plugin ships as package data: its experiment configs and config groups (found by
genodiff through the ``genodiff.configs`` entry point) and the bundled English corpus."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
# text_demo.yaml, lm1b*.yaml and the model/ and data/ groups they pick.
CONFIGS = _PACKAGE / "configs"
# Four Jane Austen novels, one sentence per line (corpus/README.md): text_demo's data.
CORPUS = _PACKAGE / "corpus" / "austen.txt.gz"
