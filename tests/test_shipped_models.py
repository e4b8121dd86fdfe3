"""The trained models that ship with genodiff (models/README.md), checked on the CPU.

Each was trained and carded on a GPU (bench/gpu_session.py); here every one must load by its
name with no network, score held-out DNA as its card says (the chrX models the repository's
chr22 slice, the species model its test split; a spread subset of the windows: each window's
score depends on the window, the seed and t_samples alone, so the subset's mean estimates the
card's mean over every window, within the two standard errors), and sample DNA: the chrX MDLM's
a model trained on real DNA finds far likelier than random letters, the species model's, of
each label, nearest that species' genome.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import re
from collections import Counter
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import torch

import genodiff
from genodiff import registry
from genodiff.checkpoints import load_model
from genodiff.checkpoints.folders import detect_layout
from genodiff.evaluate import evaluate_checkpoint, heldout_windows, window_digest
from genodiff.named_models import model_lines, named_model, named_models

ROOT = Path(__file__).resolve().parents[1]
CHR22 = ROOT / "data" / "chr22_20-21Mb.fa.gz"
CHRX_MODELS = ("mdlm-chrx", "ar-chrx")
SPECIES_MODEL = "species-conditional"
# Its training data, shipped in data/ (data/README.md), by label.
SPECIES_FASTA = {
    "human": CHR22,
    "e_coli": ROOT / "data" / "species" / "e_coli_536.fa.gz",
    "s_aureus": ROOT / "data" / "species" / "s_aureus_n315.fa.gz",
}
# The public chrX file's decompressed content (data/README.md): the cards' training data.
CHRX_FASTA_SHA256 = "f9ce73a8cbd6bd8622e845f003076e95914c0144558ddb8119016be0e8d9c3fd"
SUBSET = 24  # chr22 windows scored here, spread over the slice (the card scored all 878)


def card_row(name: str, scored: str) -> tuple[int, float, float]:
    """(windows, nats/token, its SE) of the card's held-out row ``scored``."""
    row = re.search(
        rf"^\| {re.escape(scored)} \| (\d+) x \d+ \| yes \| \w+ \| ([\d.]+) \+- ([\d.]+) \|",
        named_model(name).card(),
        flags=re.MULTILINE,
    )
    assert row is not None, f"{name}'s card has no held-out row for {scored}"
    return int(row[1]), float(row[2]), float(row[3])


def test_every_trained_model_ships_and_is_listed_by_name():
    models = named_models()
    for name in (*CHRX_MODELS, SPECIES_MODEL):
        assert name in models
        assert models[name].folder == ROOT / "models" / name
    listed = [line.split()[0] for line in model_lines(models.values())]
    assert listed == list(models)  # one line each, its name first


@pytest.mark.parametrize("name", CHRX_MODELS)
def test_card_names_the_public_data_and_the_export_no_machine_path(name):
    folder = named_model(name).folder
    assert CHRX_FASTA_SHA256 in named_model(name).card()
    saved = json.loads((folder / "genodiff.json").read_text())
    # The training machine's scratch paths mean nothing on a user's machine.
    assert "/tmp/" not in json.dumps(saved)


# The card's rows of the species model's test split: the bound given each window's true label
# (EvalResult.nelbo), and with the null label (nelbo_unconditional), which an unconditional
# model's number compares with (bench/ship_model.py's heldout_lines).
SPECIES_ROWS = {
    "the run's test split, p(x \\| y): its true label": "nelbo",
    "the run's test split, p(x): the null label": "nelbo_unconditional",
}


@pytest.mark.parametrize(
    ("name", "scored"), [(name, "chr22") for name in CHRX_MODELS] + [(SPECIES_MODEL, None)]
)
def test_scores_held_out_dna_as_its_card_says(name, scored):
    # scored: a file of the card's rows, or None: the run's own test split
    file = {"chr22": CHR22, None: None}[scored]
    result = evaluate_checkpoint(name, file, num_windows=SUBSET, seed=0, device="cpu")
    rows = {"chr22": "nelbo"} if scored else SPECIES_ROWS
    for row, field in rows.items():
        windows, card_mean, card_se = card_row(name, row)
        assert result.windows == SUBSET < windows
        # A subset of windows of the same slice, scored with each window's own noise: its mean
        # estimates the full slice's mean; the subset's SE covers the windows it left out.
        mean, se = getattr(result, field), getattr(result, f"{field}_se")
        tolerance = 4 * math.hypot(se, card_se)
        assert abs(mean - card_mean) < tolerance, (row, mean, card_mean, tolerance)
        # A trained model: well below the 1.386 nats of uniform letters (ln 4); bacterial DNA
        # in 256-bp windows leaves the species model ~0.1 below it, chrX's models ~0.2-0.25.
        assert mean < math.log(4) - 0.05


def test_species_card_gives_its_test_split_with_and_without_the_label():
    # A conditional model's p(x | y) is not comparable with an unconditional model's p(x): the
    # card gives both (DESIGN: report both), the true label's the lower bound of the two here.
    (_, given, _), (_, null, _) = (card_row(SPECIES_MODEL, row) for row in SPECIES_ROWS)
    assert given < null


def test_species_card_s_realism_counts_are_half_each_class_s_test_windows_and_say_so():
    """The card compared 64, 58 and 23 samples of the three labels and said nothing of why
    (the steering table beside it draws 64 a row): the suite holds out as many real windows as
    samples, so a class is compared with at most half its test windows' worth."""
    card = named_model(SPECIES_MODEL).card()
    windows = {
        name: len(texts)
        for name, texts in genodiff.load(SPECIES_MODEL).class_windows("test").items()
    }
    for name, count in windows.items():
        compared = min(64, count // 2)
        assert f"## Sample realism ({compared} samples with label={name}, " in card
    said = re.search(r"^Each class's samples number at most half its test windows.*$", card, re.M)
    assert said is not None, "the card does not say why its classes' sample counts differ"
    for count in windows.values():
        assert f"{min(64, count // 2)} " in said[0] and f"{count}" in said[0]


@pytest.mark.parametrize("name", CHRX_MODELS)
def test_card_scored_the_chr22_windows_genodiff_cuts_today(name):
    # The card's windows sha256 (written on the GPU) against the slice's windows cut now: a
    # change in how a file is windowed or tokenized would leave the card's number stale.
    model = load_model(named_model(name).folder, torch.device("cpu"))
    windows = heldout_windows(model.config["data"], model.tokenizer, CHR22)
    digest = window_digest(windows.dataset, windows.indices, windows.coordinates())
    card = named_model(name).card()
    assert re.search(rf"^\| chr22 \| .* \| `{digest[:16]}` \|$", card, flags=re.MULTILINE)


@pytest.mark.parametrize("name", CHRX_MODELS)
def test_card_scored_every_full_window_of_the_chr22_slice_that_is_mostly_bases(name):
    # Counted here from the FASTA: non-overlapping 1,024-bp windows (the 576-bp tail is no
    # window), those over half N skipped; the slice's 100,000-bp N run takes 98 of 976.
    bases = genome(CHR22)
    full = [bases[i : i + 1024] for i in range(0, len(bases) - 1023, 1024)]
    kept = [w for w in full if w.count("N") <= len(w) / 2]
    windows, _, _ = card_row(name, "chr22")
    assert (windows, len(full)) == (len(kept), 976)


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


def test_species_card_names_the_shipped_data_by_the_sha256_of_its_content():
    card = named_model(SPECIES_MODEL).card()
    for label, fasta in SPECIES_FASTA.items():
        content = hashlib.sha256(gzip.decompress(fasta.read_bytes())).hexdigest()
        path = fasta.relative_to(ROOT).as_posix()
        assert (
            f"| `data.fasta_by_label.{label}` | `{fasta.name}` | `{content}` | shipped: `{path}` |"
            in card
        )
    saved = json.loads((named_model(SPECIES_MODEL).folder / "genodiff.json").read_text())
    assert "/tmp/" not in json.dumps(saved) and "/work/" not in json.dumps(saved)


def test_species_card_s_example_of_a_data_copy_is_one_windows_takes():
    """The card's ``windows(split, KEY=PATH)`` example, its PATH a copy of the human FASTA,
    given to ``windows`` as written (was ``fasta=PATH``, a key this model has no file under)."""
    card = " ".join(named_model(SPECIES_MODEL).card().split())
    (example,) = re.findall(r"windows\(split, KEY=PATH\)` \(e\.g\. `([^`]+)`", card)
    copy = repr(str(SPECIES_FASTA["human"]))
    keywords = eval(f"dict({example.replace('PATH', copy)})")  # the card's Python, as written
    model = genodiff.load(SPECIES_MODEL, device="cpu")
    assert model.windows("test", **keywords) == model.windows("test")


def spectrum(sequences: list[str], k: int = 4) -> dict[str, float]:
    """k-mer frequencies of A/C/G/T k-mers (written here, not genodiff.metrics')."""
    counts = Counter(
        seq[i : i + k]
        for seq in sequences
        for i in range(len(seq) - k + 1)
        if set(seq[i : i + k]) <= set("ACGT")
    )
    total = sum(counts.values())
    return {kmer: n / total for kmer, n in counts.items()}


def js_bits(p: dict[str, float], q: dict[str, float]) -> float:
    def kl(a, m):
        return sum(a[x] * math.log2(a[x] / m[x]) for x in a if a[x] > 0)

    m = {x: (p.get(x, 0.0) + q.get(x, 0.0)) / 2 for x in set(p) | set(q)}
    return (kl(p, m) + kl(q, m)) / 2


def genome(fasta: Path) -> str:
    lines = gzip.decompress(fasta.read_bytes()).decode().splitlines()
    return "".join(line.strip().upper() for line in lines if not line.startswith(">"))


def test_guided_species_samples_of_each_label_are_nearest_that_species_genome():
    # The card's steering table, on the CPU with fewer samples and steps: each label's samples
    # under D-CFG at gamma 2 against each species' whole shipped sequence, by 4-mer JS
    # divergence. Species differ by ~0.1 bits; a class's samples lie within ~0.02 of its own
    # test windows (the card), about 0.04 here (8 samples, 16 steps; measured 0.033-0.045
    # to its own species against 0.13-0.23 to the others).
    model = genodiff.load(SPECIES_MODEL, device="cpu")
    assert list(model.classes) == list(SPECIES_FASTA)
    genomes = {label: spectrum([genome(fasta)]) for label, fasta in SPECIES_FASTA.items()}
    for label in SPECIES_FASTA:
        samples = model.generate(8, length=256, steps=16, seed=0, label=label, guidance=2.0)
        drawn = spectrum(list(samples))
        distances = {other: js_bits(drawn, genomes[other]) for other in genomes}
        assert min(distances, key=distances.get) == label, (label, distances)
