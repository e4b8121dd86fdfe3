"""The trained models that ship with genodiff (models/README.md), checked on the CPU.

Each was trained and carded on a GPU (bench/gpu_session.py); here every one must load by its
name with no network, score the repository's chr22 slice as its card says (a spread subset of
the windows: each window's score depends on the window, the seed and t_samples alone, so the
subset's mean estimates the card's mean over every window, within the two standard errors),
and sample DNA that a model trained on real DNA finds far likelier than random letters.
"""

from __future__ import annotations

import json
import math
import re
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import torch

import genodiff
from genodiff import registry
from genodiff.checkpoints.folders import detect_layout
from genodiff.evaluate import evaluate_checkpoint
from genodiff.named_models import named_model, named_models

ROOT = Path(__file__).resolve().parents[1]
CHR22 = ROOT / "data" / "chr22_20-21Mb.fa.gz"
CHRX_MODELS = ("mdlm-chrx", "ar-chrx")
# The public chrX file's decompressed content (data/README.md): the cards' training data.
CHRX_FASTA_SHA256 = "f9ce73a8cbd6bd8622e845f003076e95914c0144558ddb8119016be0e8d9c3fd"
SUBSET = 24  # chr22 windows scored here, spread over the slice (the card scored all 878)


def card_row(name: str, scored: str) -> tuple[int, float, float]:
    """(windows, nats/token, its SE) of the card's held-out row ``scored``."""
    row = re.search(
        rf"^\| {re.escape(scored)} \| (\d+) x 1024 \| yes \| \w+ \| ([\d.]+) \+- ([\d.]+) \|",
        named_model(name).card(),
        flags=re.MULTILINE,
    )
    assert row is not None, f"{name}'s card has no held-out row for {scored}"
    return int(row[1]), float(row[2]), float(row[3])


def test_every_chrx_model_ships_and_is_listed_by_name():
    models = named_models()
    for name in CHRX_MODELS:
        assert name in models
        assert models[name].folder == ROOT / "models" / name
        assert models[name].line().startswith(f"{name}  ")


@pytest.mark.parametrize("name", CHRX_MODELS)
def test_card_names_the_public_data_and_the_export_no_machine_path(name):
    folder = named_model(name).folder
    assert CHRX_FASTA_SHA256 in named_model(name).card()
    saved = json.loads((folder / "genodiff.json").read_text())
    # The training machine's scratch paths mean nothing on a user's machine.
    assert "/tmp/" not in json.dumps(saved)


@pytest.mark.parametrize("name", CHRX_MODELS)
def test_scores_the_chr22_slice_as_its_card_says(name):
    windows, card_mean, card_se = card_row(name, "chr22")
    result = evaluate_checkpoint(name, CHR22, num_windows=SUBSET, seed=0, device="cpu")
    assert result.windows == SUBSET < windows
    # A subset of windows of the same slice, scored with each window's own noise: its mean
    # estimates the full slice's mean; the subset's SE covers the windows it left out.
    tolerance = 4 * math.hypot(result.nelbo_se, card_se)
    assert abs(result.nelbo - card_mean) < tolerance, (result.nelbo, card_mean, tolerance)
    # A trained model: far from the 1.386 nats of uniform letters (ln 4).
    assert result.nelbo < math.log(4) - 0.1


def test_mdlm_samples_are_dna_the_ar_model_finds_far_likelier_than_random_letters():
    mdlm, ar = genodiff.load("mdlm-chrx", device="cpu"), genodiff.load("ar-chrx", device="cpu")
    samples = mdlm.generate(4, length=256, steps=64, seed=0)
    assert len(samples) == 4
    assert all(len(s) == 256 and set(s) <= set("ACGT") for s in samples)
    letters = torch.randint(4, (4, 256), generator=torch.Generator().manual_seed(0))
    random_dna = ["".join("ACGT"[i] for i in row) for row in letters.tolist()]
    # Scored by the other model (exact NLL): real-like DNA lies near the chr22 slice's ~1.13
    # nats/token; uniform letters cost the AR model more than ln 4 = 1.386.
    sampled, uniform = ar.score(list(samples), seed=0), ar.score(random_dna, seed=0)
    assert max(uniform) > math.log(4)
    assert sum(sampled) / 4 < sum(uniform) / 4 - 0.1, (sampled, uniform)


def test_a_broken_backbone_plugin_does_not_block_the_shipped_models(monkeypatch):
    # A plugin whose import fails: a built-in model's folder must load without importing it.
    broken = EntryPoint("broken", "no_such_module:Thing", "genodiff.backbones")
    monkeypatch.setattr(registry, "entry_points", lambda group: [broken])
    registry._REGISTRIES["backbone"].pop("broken", None)
    assert genodiff.load("mdlm-chrx", device="cpu").score(["ACGT" * 16], seed=0)[0] > 0
    # A folder no built-in layout reads still reaches the plugins, and names the broken one.
    with pytest.raises(ImportError, match="backbone plugin 'broken' .* failed to load"):
        detect_layout({"model_type": "something_else"})
