"""The oracle (genodiff evaluate-samples --oracle) and genodiff data labelled-split.

A tiny labelled-FASTA config (two classes: A/T-rich and G/C-rich records) is split with
``genodiff data labelled-split``, a classifier is fine-tuned on the written folder with
``genodiff finetune``, and its checkpoint judges samples. Expected values are written by hand:
the windows from the split boundaries and the generated strings, the scores from counting.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from Bio import SeqIO

import genodiff
from genodiff import cli
from genodiff.config import load_config
from genodiff.data.benchmarks import load_task
from genodiff.data.build import build_datamodule
from genodiff.domains import DNADomain
from genodiff.errors import InputValueError
from genodiff.finetuning.trained import RECORD_KEY, load_finetuned_classifier
from genodiff.guidance import Guidance
from genodiff.metrics.oracle import (
    evaluate_with_oracle,
    oracle_scores,
    parse_references,
    sample_classes,
)
from genodiff.metrics.report import oracle_markdown
from genodiff.metrics.suite import QualitySettings
from genodiff.sample_files import read_sample_labels, write_samples
from genodiff.sample_formats import SamplingRun
from genodiff.tokenizers import CHECKPOINT_KEY, DNATokenizer, tokenizer_record

AT_RICH, GC_RICH = (4, 1, 1, 4), (1, 4, 4, 1)  # weights of A, C, G, T


def random_dna(rng: random.Random, weights: tuple[int, ...], n: int) -> str:
    return "".join(rng.choices("ACGT", weights=weights, k=n))


# Two records per class, 200 bp each; windows of 20 bp, splits 50 / 10 / 40 %: the test region
# of a 200-bp record is [120, 200), windows start at 120, 140, 160, 180.
RECORD = 200
WINDOW = 20
TEST_STARTS = [120, 140, 160, 180]
DNA = DNADomain.alphabet

SPLIT_CONFIG = """
defaults:
  - conditional_demo
  - _self_
name: tiny_species
data:
  root: null
  task: null
  fasta_by_label: {{at: {at}, gc: {gc}}}
  max_length: 20
  split_fractions: [0.5, 0.1, 0.4]
  max_n_fraction: 0.5
"""

ORACLE_CONFIG = """
name: oracle
output_dir: {out}
folds: 2
keep_checkpoints: true
model: {{name: caduceus, d_model: 16, n_layer: 1, vocab_size: 12, pad_vocab_size_multiple: 8}}
benchmark: {{root: {root}, tasks: [tiny_species], download: false}}
classifier: {{pooling: mean, conjoin_eval: true}}
sweep: {{lr: [1.0e-2], batch_size: [4]}}
trainer: {{accelerator: cpu, max_epochs: 4, enable_progress_bar: false, log_every_n_steps: 1,
          num_sanity_val_steps: 0}}
"""


def write_fasta(path: Path, records: dict[str, str], width: int = 60) -> None:
    lines = []
    for name, seq in records.items():
        lines.append(f">{name}")
        lines += [seq[i : i + width] for i in range(0, len(seq), width)]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def species(tmp_path_factory):
    """The class FASTAs (as strings), the split written by the CLI, and an oracle trained on it."""
    root = tmp_path_factory.mktemp("species")
    rng = random.Random(7)
    records = {
        "at": {
            "at1": random_dna(rng, AT_RICH, RECORD),
            # soft-masked bases in a test window, and an N run filling the window at 180
            "at2": random_dna(rng, AT_RICH, 140).lower() + random_dna(rng, AT_RICH, 40) + "N" * 20,
        },
        "gc": {
            "gc1": random_dna(rng, GC_RICH, RECORD),
            "gc2": random_dna(rng, GC_RICH, RECORD),
        },
    }
    for name, recs in records.items():
        write_fasta(root / f"{name}.fa", recs)
    config = root / "tiny_species.yaml"
    config.write_text(SPLIT_CONFIG.format(at=root / "at.fa", gc=root / "gc.fa"))
    dest = root / "split"
    assert cli.main(["data", "labelled-split", str(config), "--dest", str(dest)]) == 0
    out = root / "oracle_run"
    oracle_config = root / "oracle.yaml"
    oracle_config.write_text(ORACLE_CONFIG.format(out=out, root=dest))
    genodiff.finetune(str(oracle_config), progress=False)
    (checkpoint,) = (out / "runs" / "tiny_species").glob("*/fold0/checkpoints/best-*.ckpt")
    return {"records": records, "config": config, "dest": dest, "oracle": checkpoint, "out": out}


def expected_windows(records: dict[str, str]) -> list[tuple[str, str]]:
    """(name, upper-cased bases) of the test windows of one class's records, by hand: every
    start of TEST_STARTS in each record, a window of more than half N dropped."""
    windows = []
    for record, seq in records.items():
        for start in TEST_STARTS:
            bases = seq[start : start + WINDOW]
            if bases.upper().count("N") <= WINDOW / 2:
                windows.append((f"{record}:{start}-{start + WINDOW}", bases.upper()))
    return windows


# ----------------------------------------------------------------------------- labelled-split


def test_labelled_split_writes_the_test_windows_byte_for_byte(species):
    dest = species["dest"]
    task = dest / "tiny_species"
    manifest = json.loads((dest / "manifest.json").read_text())
    for name, n_test in (("at", 1), ("gc", 2)):  # at: 7 windows (one all-N dropped), gc: 8
        windows = expected_windows(species["records"][name])
        assert len(windows) == {"at": 7, "gc": 8}[name]
        train = len(windows) - n_test  # round(0.2 * 7) = 1, round(0.2 * 8) = 2: the last ones
        for i, (window, bases) in enumerate(windows):
            part = "train" if i < train else "test"
            path = task / part / name / f"{i:05d}.txt"
            assert path.read_bytes() == (bases + "\n").encode()
            assert (
                manifest["files"][f"tiny_species/{part}/{name}/{i:05d}.txt"] == f"{name}|{window}"
            )
        for part, count in (("train", train), ("test", n_test)):
            assert len(list((task / part / name).iterdir())) == count
        reference = "".join(f">{name}|{w}\n{b}\n" for w, b in windows)
        assert (dest / "reference" / f"{name}.fa").read_text() == reference
        assert manifest["classes"][name] == {
            "windows": len(windows),
            "oracle_train": train,
            "oracle_test": n_test,
        }
    assert manifest["files"]["tiny_species/train/at/00004.txt"] == "at|at2:120-140"  # soft-masked
    assert manifest["split"] == "test"


def test_finetune_reads_the_written_folder_and_its_checkpoint_is_an_oracle(species):
    task = load_task(species["dest"], "tiny_species", download=False)
    assert task.classes == ["at", "gc"] and task.max_length == WINDOW
    assert task.train.labels.tolist() == [0] * 6 + [1] * 6
    assert task.test.labels.tolist() == [0] + [1] * 2

    oracle = load_finetuned_classifier(species["oracle"])
    assert (oracle.classes, oracle.max_length, oracle.task) == (["at", "gc"], 20, "tiny_species")
    checkpoint = torch.load(species["oracle"], weights_only=True)
    # the tokenizer the task was encoded with is stored, and the oracle reads with it
    assert checkpoint[CHECKPOINT_KEY] == tokenizer_record(DNATokenizer())
    assert tokenizer_record(oracle.classifier.tokenizer) == checkpoint[CHECKPOINT_KEY]
    state = oracle.classifier.state_dict()
    for key, tensor in checkpoint["state_dict"].items():
        torch.testing.assert_close(state[key.removeprefix("classifier.")], tensor)
    # the fold's recorded test accuracy, reproduced by the loaded oracle on the same sequences
    (result,) = species["out"].glob("runs/tiny_species/*/fold0/result.json")
    recorded = json.loads(result.read_text())["test_acc"]
    test_bases = [
        p.read_text().strip()
        for p in sorted((species["dest"] / "tiny_species" / "test").glob("*/*.txt"))
    ]
    called = oracle.predict(test_bases, batch_size=2)
    assert np.mean(called == task.test.labels.numpy()) == pytest.approx(recorded)


def test_labelled_split_refuses_a_non_empty_dest_and_replaces_it_with_overwrite(
    species, tmp_path, capsys
):
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "stale.txt").write_text("old")
    args = ["data", "labelled-split", str(species["config"]), "--dest", str(dest)]
    assert cli.main(args) == 2
    refusal = "is not empty; name a new folder, or overwrite it (everything in it)"
    assert capsys.readouterr().err.strip().endswith(f"{refusal} (--dest, --overwrite)")
    bad_values = {"--oracle-test-fraction": "1", "--task": "a/b"}
    for option, value in bad_values.items():
        assert cli.main([*args, "--overwrite", option, value]) == 2
        assert capsys.readouterr().err.strip().endswith(f"({option})")
    assert [p.name for p in dest.iterdir()] == ["stale.txt"]
    assert cli.main([*args, "--overwrite", "--task", "again"]) == 0
    assert sorted(p.name for p in dest.iterdir()) == ["again", "manifest.json", "reference"]
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no staging left


def test_labelled_split_of_a_benchmark_config_writes_its_files(tmp_path):
    root = Path(__file__).resolve().parents[1]
    task = root / "tests" / "data" / "genomic_benchmarks" / "human_vs_phage"
    config = str(root / "configs" / "conditional_demo.yaml")
    dest = tmp_path / "dest"
    assert cli.main(["data", "labelled-split", config, "--dest", str(dest)]) == 0  # was refused
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["task"] == "conditional_demo" and manifest["split"] == "test"
    for name in ("human", "phage"):
        files = sorted((task / "test" / name).glob("*.txt"))  # the task's test/, in name order
        assert len(files) == 60  # 48 for the oracle's training, the last 12 for its test
        names = [f"{name}|test/{name}/{file.name}" for file in files]
        for i, file in enumerate(files):
            part = "train" if i < 48 else "test"
            relative = f"conditional_demo/{part}/{name}/{i:05d}.txt"
            assert (dest / relative).read_text() == file.read_text().strip().upper() + "\n"
            assert manifest["files"][relative] == names[i]
        reference = list(SeqIO.parse(dest / "reference" / f"{name}.fa", "fasta"))
        assert [r.id for r in reference] == names
        assert [str(r.seq) for r in reference] == [f.read_text().strip().upper() for f in files]

    # The valid split is the part of train/ the data module holds out for validation.
    valid = tmp_path / "valid"
    assert (
        cli.main(["data", "labelled-split", config, "--split", "valid", "--dest", str(valid)]) == 0
    )
    held = build_datamodule(load_config(config).data).heldout_dataset("valid")
    written = [r.id.split("|")[1] for c in ("human", "phage")
               for r in SeqIO.parse(valid / "reference" / f"{c}.fa", "fasta")]  # fmt: skip
    assert written == held.names and len(written) == 50 and written[0].startswith("train/")


# ----------------------------------------------------------------------------- the scores


def test_oracle_scores_against_hand_counts():
    asked = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2, 2])
    called = np.array([0, 0, 1, 2, 1, 1, 0, 2, 2, 0])
    scores = oracle_scores(asked, called, ["a", "b", "c"])
    assert scores["oracle_accuracy"] == pytest.approx(6 / 10)
    # F1 = 2TP / (2TP + FP + FN): a 4/8, b 4/6, c 4/6
    assert scores["oracle_macro_f1"] == pytest.approx((1 / 2 + 2 / 3 + 2 / 3) / 3)
    assert scores["oracle_confusion"]["counts"] == [[2, 1, 1], [1, 2, 0], [1, 0, 2]]


def test_macro_f1_averages_over_the_classes_samples_were_drawn_for():
    scores = oracle_scores(np.array([0, 0, 0]), np.array([0, 1, 0]), ["a", "b", "c"])
    assert scores["oracle_accuracy"] == pytest.approx(2 / 3)
    assert scores["oracle_macro_f1"] == pytest.approx(4 / 5)  # a alone: TP 2, FN 1, FP 0


class StubOracle:
    """Known calls, in the order of the sequences it is given."""

    def __init__(self, classes: list[str], calls: dict[str, int]) -> None:
        self.classes, self.calls, self.seen = classes, calls, []

    def predict(self, sequences):
        self.seen = list(sequences)
        return np.array([self.calls[s] for s in sequences])


def test_samples_are_routed_by_class_and_scored_against_their_class_reference():
    rng = random.Random(3)
    reference = {
        "at": [random_dna(rng, AT_RICH, 100) for _ in range(40)],
        "gc": [random_dna(rng, GC_RICH, 100) for _ in range(40)],
    }
    at_samples = reference["at"][:20]  # identical to reference windows of their class
    wrong = [random_dna(rng, AT_RICH, 100) for _ in range(20)]  # drawn for gc, look like at
    samples = at_samples[:10] + wrong[:10] + at_samples[10:] + wrong[10:]
    asked = np.array([0] * 10 + [1] * 10 + [0] * 10 + [1] * 10)
    calls = {s: 0 for s in samples}
    calls.update({s: 1 for s in wrong[:5]})  # the oracle calls 5 of the 20 gc samples gc
    oracle = StubOracle(["at", "gc"], calls)
    quality = evaluate_with_oracle(samples, asked, reference, oracle, DNA, QualitySettings(folds=3))
    m = quality.metrics
    assert oracle.seen == samples
    assert m["oracle_accuracy"] == pytest.approx(25 / 40)
    assert m["oracle_confusion"]["counts"] == [[20, 0], [15, 5]]
    assert m["samples"]["per_class"] == {
        "at": {"sequences": 20, "oracle_accuracy": 1.0},
        "gc": {"sequences": 20, "oracle_accuracy": 0.25},
    }
    assert quality.per_class["at"].samples == at_samples  # routed in file order
    assert quality.per_class["gc"].samples == wrong
    assert set(m["kmer_js"]["at"]) == {"3", "6"}
    assert m["kmer_js"]["at"]["3"] < 0.02  # the same k-mers as the class's reference
    assert m["kmer_js"]["gc"]["3"] > 5 * m["kmer_js"]["at"]["3"]  # another class's k-mers
    assert m["discriminator_auroc"]["gc"] > 0.9 > m["discriminator_auroc"]["at"]
    # Realism beside accuracy: the composition of each class's samples against its reference.
    gc = lambda seqs: np.mean([(s.count("G") + s.count("C")) / len(s) for s in seqs])  # noqa: E731
    assert m["gc_content"]["gc"] == {
        "samples": pytest.approx(gc(wrong)),  # A/T-rich samples of the G/C-rich class
        "reference": pytest.approx(gc(reference["gc"])),
    }
    assert m["gc_content"]["gc"]["samples"] < 0.4 < 0.6 < m["gc_content"]["gc"]["reference"]
    assert set(m["cpg_oe"]) == {"at", "gc"} and set(m["cpg_oe"]["at"]) == {"samples", "reference"}
    table = oracle_markdown(m)
    assert "| class | samples | oracle agrees | discriminator AUROC | GC (real) | CpG o/e" in table
    auroc = m["discriminator_auroc"]["gc"]
    row = f"| gc | 20 | 0.250 | {auroc:.3f} | {gc(wrong):.3f} ({gc(reference['gc']):.3f}) |"
    assert row in table
    assert "0.5 = a k-mer classifier cannot tell the samples from the class's real DNA" in table


def test_header_labels_route_samples_and_label_fills_the_rest(tmp_path):
    path = tmp_path / "s.fa"
    path.write_text(
        ">sample_0_seed0 checkpoint=x label=gc guidance=2\nACGT\n"
        ">sample_1_seed0 checkpoint=x\nACGT\n"
        ">sample_2_seed0 label=at\nAC\nGT\n"
    )
    labels = read_sample_labels(path)
    assert labels == ["gc", None, "at"]
    assert sample_classes(labels, "at", ["at", "gc"], "s.fa").tolist() == [1, 0, 0]
    with pytest.raises(
        InputValueError, match="sample 2 names no class.*give a label for it, one of: at, gc"
    ) as caught:
        sample_classes(labels, None, ["at", "gc"], "s.fa")
    assert caught.value.parameter == "label"
    with pytest.raises(InputValueError, match="sample 1, names class 'xx'.*its classes: at, gc"):
        sample_classes(["xx"], None, ["at", "gc"], "s.fa")
    with pytest.raises(InputValueError, match="^label names class 'xx'") as caught:
        sample_classes([None], "xx", ["at", "gc"], "s.fa")
    assert caught.value.parameter == "label"


def test_a_class_name_with_spaces_reads_back_whole_from_a_fasta_header(tmp_path):
    # A header is split into words at whitespace: "label=human enhancer" read back as the
    # class "human". The name is percent-encoded in the header (its "%" too) and decoded.
    name = "human enhancer, 50% GC"
    guidance = Guidance(0, gamma=2.0, label_name=name)
    run = SamplingRun("my run/last.ckpt", "cached", 8, 5, guidance=guidance)
    tokenizer = DNATokenizer()
    ids = torch.tensor([tokenizer.encode("ACGT"), tokenizer.encode("GGCC")])  # (2, 4)
    path = write_samples(ids, tmp_path / "s.fa", run, tokenizer)
    header = path.read_text().splitlines()[0]
    assert "label=human%20enhancer,%2050%25%20GC guidance=2 " in header
    assert "checkpoint=my%20run/last.ckpt " in header
    assert read_sample_labels(path) == [name, name]


def test_jsonl_samples_carry_their_label_field(tmp_path):
    path = tmp_path / "s.jsonl"
    rows = [{"id": "a", "text": "ACGT", "label": "gc"}, {"id": "b", "text": "ACGT"}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert read_sample_labels(path) == ["gc", None]
    (tmp_path / "s.txt").write_text("ACGT\nACGA\n")
    assert read_sample_labels(tmp_path / "s.txt") == [None, None]


def test_references_name_their_class_or_belong_to_label(tmp_path):
    plain = tmp_path / "a=b.fa"  # an existing file whose name holds '=' is a plain FASTA
    plain.write_text(">r\nACGT\n")
    assert parse_references(["gc=g.fa", str(plain)], "at") == {"gc": Path("g.fa"), "at": plain}
    with pytest.raises(InputValueError, match="give a label .*or name the class") as caught:
        parse_references(["x.fa"], None)
    assert caught.value.parameter == ("label", "reference")
    with pytest.raises(InputValueError, match="two reference files for class 'at'") as caught:
        parse_references(["at=x.fa", "y.fa"], "at")
    assert caught.value.parameter == "reference"


# ----------------------------------------------------------------------------- the command


def labelled_samples(path: Path, records: dict[str, list[str]], labelled: bool = True) -> None:
    lines = []
    for name, seqs in records.items():
        for i, seq in enumerate(seqs):
            lines += [f">sample_{name}_{i}" + (f" seed=0 label={name}" if labelled else ""), seq]
    path.write_text("\n".join(lines) + "\n")


def test_evaluate_samples_with_the_oracle_writes_scores_by_class(species, tmp_path, capsys):
    rng = random.Random(11)
    # 3 samples per class: the at class's reference gives 7 windows of their 20 bp (at least
    # 2 per sample, so the k-mer comparison has a pool as large as the samples)
    draws = {"at": [random_dna(rng, AT_RICH, 20) for _ in range(3)],
             "gc": [random_dna(rng, GC_RICH, 20) for _ in range(3)]}  # fmt: skip
    samples = tmp_path / "s.fa"
    labelled_samples(samples, draws)
    dest, out = species["dest"], tmp_path / "report"
    args = ["evaluate-samples", str(samples), "--oracle", str(species["oracle"]), "--out", str(out)]
    refs = [f"--reference={n}={dest / 'reference' / f'{n}.fa'}" for n in ("at", "gc")]
    assert cli.main([*args, *refs, "--no-progress", "--folds", "2"]) == 0
    m = json.loads((out / "metrics.json").read_text())
    called = load_finetuned_classifier(species["oracle"]).predict(draws["at"] + draws["gc"])
    asked = np.array([0] * 3 + [1] * 3)
    assert m["oracle_accuracy"] == pytest.approx(np.mean(called == asked))
    assert set(m["kmer_js"]) == set(m["discriminator_auroc"]) == {"at", "gc"}
    assert m["oracle"]["classes"] == ["at", "gc"] and m["oracle"]["task"] == "tiny_species"
    for name in ("at", "gc"):
        assert (out / name / "metrics.md").is_file()
        assert m["per_class"][name]["samples"]["sequences"] == 3
        assert set(m["kmer_js_real_vs_real_sd"][name]) == {"3", "6"}
    assert "| at | 3 |" in (out / "metrics.md").read_text()


def test_a_plain_reference_belongs_to_the_label_class(species, tmp_path):
    rng = random.Random(5)
    samples = tmp_path / "s.fa"
    labelled_samples(samples, {"gc": [random_dna(rng, GC_RICH, 20) for _ in range(4)]}, False)
    out = tmp_path / "report"
    reference = species["dest"] / "reference" / "gc.fa"
    args = ["evaluate-samples", str(samples), "--oracle", str(species["oracle"])]
    assert cli.main([*args, "--reference", str(reference), "--label", "gc", "--out", str(out),
                     "--folds", "2", "--no-progress"]) == 0  # fmt: skip
    m = json.loads((out / "metrics.json").read_text())
    assert list(m["kmer_js"]) == ["gc"] and m["samples"]["per_class"]["gc"]["sequences"] == 4


def old_finetune_checkpoint(oracle: Path, path: Path) -> Path:
    checkpoint = torch.load(oracle, weights_only=True)
    del checkpoint["hyper_parameters"][RECORD_KEY]
    torch.save(checkpoint, path)
    return path


def training_checkpoint(path: Path) -> Path:
    torch.save({"state_dict": {}, "hyper_parameters": {"config": {}}}, path)
    return path


# The option the CLI names (the parameter at fault) for the cases that have one.
OPTIONS = {
    "unknown --label": "--label",
    "no label anywhere": "--label",
    "reference of another class": "--reference",
    "no reference for a class": "--reference",
    "training checkpoint": "--oracle",  # was: no option named
}
# where the file goes is sample's and eval's --checkpoint, which evaluate-samples does not
# have: its line names --oracle, which got it (was "(--checkpoint)", as if evaluate-samples
# took one, then no option at all)
NOT_THE_CHECKPOINT_OPTION = {"training checkpoint"}


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("unknown header label", "'mouse', which the oracle does not know; its classes: at, gc"),
        ("unknown --label", "label names class 'mouse'"),
        ("no label anywhere", "names no class (no label=NAME in its header); give a label"),
        ("reference of another class", "names class 'mouse', which the oracle does not know"),
        ("no reference for a class", "no reference for class(es) gc"),
        ("old finetune checkpoint", "written before checkpoints stored their class names"),
        (
            "training checkpoint",
            "train.ckpt is a generative model (genodiff train), and the oracle must be a "
            "fine-tuned classifier (genodiff finetune): give a checkpoint a genodiff finetune run",
        ),
        ("not a checkpoint", "is not a loadable genodiff checkpoint"),
    ],
)
def test_bad_oracle_input_is_one_line_and_writes_nothing(species, tmp_path, capsys, case, message):
    rng = random.Random(1)
    samples = tmp_path / "s.fa"
    draws = {"at": [random_dna(rng, AT_RICH, 20) for _ in range(4)],
             "gc": [random_dna(rng, GC_RICH, 20) for _ in range(4)]}  # fmt: skip
    labelled_samples(samples, draws, labelled=case != "no label anywhere")
    refs = species["dest"] / "reference"
    oracle, label = species["oracle"], None
    references = [f"at={refs / 'at.fa'}", f"gc={refs / 'gc.fa'}"]
    if case == "unknown header label":
        samples.write_text(samples.read_text().replace("label=gc", "label=mouse"))
    elif case == "unknown --label":
        label = "mouse"
    elif case == "reference of another class":
        references.append(f"mouse={refs / 'at.fa'}")
    elif case == "no reference for a class":
        references = references[:1]
    elif case == "old finetune checkpoint":
        oracle = old_finetune_checkpoint(oracle, tmp_path / "old.ckpt")
    elif case == "training checkpoint":
        oracle = training_checkpoint(tmp_path / "train.ckpt")
    elif case == "not a checkpoint":
        oracle = tmp_path / "junk.ckpt"
        oracle.write_text("not torch")
    out = tmp_path / "report"
    args = ["evaluate-samples", str(samples), "--oracle", str(oracle), "--out", str(out)]
    args += [f"--reference={r}" for r in references]
    args += ["--label", label] if label else []
    assert cli.main([*args, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    option = OPTIONS.get(case)
    assert option is None or err.strip().endswith(f"({option})"), err
    assert case not in NOT_THE_CHECKPOINT_OPTION or "--checkpoint" not in err, err
    assert not out.exists()


def test_a_training_checkpoint_as_oracle_is_refused_naming_the_parameter(species, tmp_path):
    """From Python the refusal names ``oracle`` (the CLI maps it to --oracle), what an oracle
    must be and what the file is (was: where a training checkpoint goes, no parameter)."""
    samples = tmp_path / "s.fa"
    labelled_samples(samples, {"at": ["ACGTACGTAC"] * 3})
    wrong = training_checkpoint(tmp_path / "train.ckpt")
    refs = species["dest"] / "reference"
    with pytest.raises(InputValueError) as refused:
        genodiff.evaluate_samples(samples, {"at": refs / "at.fa"}, oracle=wrong, out=tmp_path / "r")
    assert refused.value.parameter == "oracle"
    assert str(refused.value).startswith(f"oracle={wrong} is a generative model (genodiff train)")
    assert "the oracle must be a fine-tuned classifier (genodiff finetune)" in str(refused.value)
    assert not (tmp_path / "r").exists()


def test_without_an_oracle_class_options_are_refused(species, tmp_path, capsys):
    samples = tmp_path / "s.fa"
    labelled_samples(samples, {"at": ["ACGTACGTAC"] * 3})
    refs = species["dest"] / "reference"
    for extra in (["--label", "at"], [f"--reference=gc={refs / 'gc.fa'}"]):
        args = ["evaluate-samples", str(samples), f"--reference={refs / 'at.fa'}", *extra]
        assert cli.main([*args, "--out", str(tmp_path / "r")]) == 2
        assert "--oracle" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
