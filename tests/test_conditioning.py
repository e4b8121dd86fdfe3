"""Class-conditional training: label dropout, labelled data, conditional backbones, the two
held-out NELBOs, and a tiny conditional run end to end (genodiff/conditioning.py)."""

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import genodiff
from genodiff import cli
from genodiff.backbones.caduceus import Caduceus
from genodiff.backbones.hyena import HyenaDNA
from genodiff.backbones.mamba_lm import MambaLM
from genodiff.batch_shard import BatchShard
from genodiff.conditioning import drop_labels, null_label
from genodiff.config import ConfigError
from genodiff.data.labelled import LabelledDataModule, class_count_lines
from genodiff.errors import InputValueError
from genodiff.evaluate import score_windows
from genodiff.model import GenerativeModel
from genodiff.objectives.mdlm import MDLM
from genodiff.tokenizers import DNATokenizer
from genodiff.training.module import GenerativeTrainingModule
from tests.test_bench_scripts import load_bench_script

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "tests" / "data" / "genomic_benchmarks" / "human_vs_phage"
TOK = DNATokenizer()
CMAP = torch.tensor(TOK.complement_map)  # (16,)


def binomial_ok(count: int, n: int, p: float, sigmas: float = 5.0) -> bool:
    return abs(count - n * p) <= sigmas * math.sqrt(n * p * (1 - p))


# ----------------------------------------------------------------------------- label dropout


def test_label_dropout_replaces_the_fraction_asked_for_by_the_null_label():
    n, classes = 20_000, 3
    labels = torch.arange(n) % classes
    for p in (0.1, 0.5):
        dropped = drop_labels(labels, p, classes, torch.Generator().manual_seed(0))
        nulls = dropped == null_label(classes)
        assert binomial_ok(int(nulls.sum()), n, p)
        assert torch.equal(dropped[~nulls], labels[~nulls])  # the others keep their label
    assert torch.equal(drop_labels(labels, 0.0, classes), labels)
    assert (drop_labels(labels, 1.0, classes) == classes).all()


def test_label_dropout_draws_for_the_global_batch_so_ranks_match_one_process():
    labels = torch.arange(16) % 2
    whole = drop_labels(labels, 0.5, 2, torch.Generator().manual_seed(3))
    parts = [
        drop_labels(labels[i : i + 8], 0.5, 2, torch.Generator().manual_seed(3), BatchShard(i, 16))
        for i in (0, 8)
    ]
    assert torch.equal(torch.cat(parts), whole)


def conditional_config(model: dict, objective: str = "mdlm", **conditioning) -> dict:
    return {
        "model": model,
        "objective": {"name": objective},
        "data": {"name": "labelled", "root": str(TASK.parent), "task": TASK.name},
        "ema": {"decay": 0.0},
        "conditioning": {"labels": ["human", "phage"], "cond_dropout": 0.25, **conditioning},
    }


TINY_CADUCEUS = {"name": "caduceus", "d_model": 8, "n_layer": 1}


def test_training_labels_are_dropped_and_heldout_labels_are_not():
    module = GenerativeTrainingModule(conditional_config(TINY_CADUCEUS))
    module.training_noise = torch.Generator().manual_seed(0)
    labels = torch.arange(4000) % 2
    batch = {"input_ids": torch.zeros(4000, 4, dtype=torch.long), "labels": labels}
    trained = module.training_labels(batch)
    nulls = trained == null_label(2)
    assert binomial_ok(int(nulls.sum()), 4000, 0.25)
    assert torch.equal(trained[~nulls], labels[~nulls])
    assert torch.equal(module._batch_labels(batch), labels)  # what validation scores with


def test_the_null_label_is_trained_only_through_dropout():
    """The null row of the label embedding gets a gradient exactly when labels are dropped."""
    model = GenerativeModel(conditional_config(TINY_CADUCEUS))
    rows = model.backbone.backbone.label_embedding.embedding.weight  # (3, d)
    ids = torch.randint(7, 11, (16, 32), generator=torch.Generator().manual_seed(0))
    labels = torch.zeros(16, dtype=torch.long)
    for p, null_moves in ((0.0, False), (1.0, True)):
        rows.grad = None
        dropped = drop_labels(labels, p, 2, torch.Generator().manual_seed(1))
        nelbo, _ = model.objective.loss(model.backbone, ids, torch.Generator(), labels=dropped)
        nelbo.sum().backward()
        assert bool(rows.grad[2].abs().sum() > 0) == null_moves
        assert bool(rows.grad[0].abs().sum() > 0) != null_moves


# ----------------------------------------------------------------------------- backbones


def rc_permute(logits):
    return logits.flip(1)[..., CMAP]


@pytest.mark.parametrize("fused_add_norm", [True, False])
def test_caduceus_ps_stays_rc_equivariant_with_a_label(fused_add_norm):
    torch.manual_seed(0)
    model = Caduceus(
        d_model=8,
        n_layer=2,
        vocab_size=12,
        rcps=True,
        complement_map=CMAP.tolist(),
        fused_add_norm=fused_add_norm,
        num_classes=3,
    ).double()
    x = torch.randint(7, 11, (4, 24), generator=torch.Generator().manual_seed(1))
    y = torch.tensor([0, 1, 2, 3])  # 3 = the null label
    x_rc = CMAP[x.flip(-1)]
    out, out_rc = model(x, labels=y), model(x_rc, labels=y)
    torch.testing.assert_close(out_rc, rc_permute(out), rtol=1e-10, atol=1e-10)
    other = model(x, labels=torch.tensor([1, 2, 3, 0]))
    assert (other - out).abs().amax(dim=(1, 2)).min() > 1e-4  # the label changes every row


@pytest.mark.parametrize(
    "build",
    [
        lambda c: Caduceus(d_model=8, n_layer=1, vocab_size=12, num_classes=c),
        lambda c: MambaLM(d_model=8, n_layer=1, vocab_size=12, num_classes=c),
        lambda c: HyenaDNA(d_model=8, n_layer=1, vocab_size=12, num_classes=c),
    ],
)
def test_unconditional_backbones_hold_no_new_weights_and_conditional_ones_one(build):
    plain, conditional = build(0), build(2)
    assert not plain.capabilities.class_conditioning
    assert conditional.capabilities.class_conditioning
    extra = set(conditional.state_dict()) - set(plain.state_dict())
    assert set(plain.state_dict()) <= set(conditional.state_dict())
    assert [k.rsplit(".", 2)[-2:] for k in extra] == [["embedding", "weight"]]
    assert conditional.state_dict()[extra.pop()].shape == (3, 8)  # 2 classes + null
    with pytest.raises(ValueError, match="without classes"):
        plain(torch.zeros(1, 4, dtype=torch.long), labels=torch.zeros(1, dtype=torch.long))


def test_conditional_mamba_steps_as_it_runs_in_parallel():
    """AR with a label: the recurrent step adds the label as the parallel forward does."""
    torch.manual_seed(0)
    model = MambaLM(d_model=16, n_layer=2, vocab_size=12, num_classes=2).double().eval()
    x = torch.randint(7, 11, (3, 10), generator=torch.Generator().manual_seed(2))
    y = torch.tensor([0, 1, 2])
    parallel = model(x, labels=y)  # (3, 10, V)
    cache = model.allocate_inference_cache(3, torch.float64)
    steps = torch.stack([model.step(x[:, i], cache, labels=y) for i in range(10)], dim=1)
    torch.testing.assert_close(steps, parallel, rtol=1e-9, atol=1e-9)
    assert not torch.allclose(model(x, labels=torch.tensor([1, 0, 2])), parallel)


def test_a_label_on_a_backbone_without_the_capability_is_a_config_error(monkeypatch):
    from genodiff import registry

    class Plain(MambaLM):  # takes no num_classes
        def __init__(self, d_model: int, n_layer: int, vocab_size: int) -> None:
            super().__init__(d_model=d_model, n_layer=n_layer, vocab_size=vocab_size)

    original = registry.get

    def get(kind, name):
        return Plain if (kind, name) == ("backbone", "plain") else original(kind, name)

    monkeypatch.setattr(registry, "get", get)
    config = conditional_config({"name": "plain", "d_model": 8, "n_layer": 1}, objective="ar")
    with pytest.raises(ConfigError, match="cannot be conditioned on class labels"):
        GenerativeModel(config)
    config["conditioning"]["labels"] = None
    assert not GenerativeModel(config).backbone.capabilities.class_conditioning


# ----------------------------------------------------------------------------- labelled data


def test_the_genomic_benchmarks_module_reads_the_bundled_task_with_the_right_counts():
    classes = sorted(p.name for p in (TASK / "train").iterdir())
    splits = ("train", "test")
    files = {s: {c: sorted((TASK / s / c).glob("*.txt")) for c in classes} for s in splits}
    module = LabelledDataModule(root=str(TASK.parent), task=TASK.name, valid_fraction=0.1)
    module.check_files()
    assert module.class_names() == classes == ["human", "phage"]
    for label, name in enumerate(classes):
        n_train = len(files["train"][name])
        held = round(0.1 * n_train)
        assert module.class_counts("valid")[label] == held
        assert module.class_counts("train")[label] == n_train - held
        assert module.class_counts("test")[label] == len(files["test"][name])
    seen = []
    for split in ("train", "valid", "test"):
        dataset = module.dataset_of(split)
        for i in range(0, len(dataset), 37):
            item, where = dataset[i], dataset.item_name(i)
            text = (TASK / where).read_text().strip()
            assert TOK.decode(item["input_ids"].tolist()) == text.upper()
            assert classes[int(item["labels"])] == Path(where).parent.name
        seen += [dataset.item_name(i) for i in range(len(dataset))]
    assert len(seen) == len(set(seen)) == sum(len(f) for s in files.values() for f in s.values())
    assert len(class_count_lines(module)) == 2


def write_fasta(path: Path, records: dict[str, str]) -> None:
    path.write_text("".join(f">{name}\n{seq}\n" for name, seq in records.items()))


def test_labelled_fasta_splits_are_stretches_of_each_record_in_order(tmp_path):
    rng = np.random.default_rng(0)

    def bases(n: int) -> str:
        return "".join(rng.choice(list("ACGT"), n))

    write_fasta(tmp_path / "a.fa", {"a1": bases(3000), "a2": bases(1100)})
    write_fasta(tmp_path / "b.fa", {"b1": bases(2000)})
    write_fasta(tmp_path / "tiny.fa", {"t1": bases(400)})  # too short for valid / test windows
    paths = {name: str(tmp_path / f"{name}.fa") for name in ("a", "b", "tiny")}
    module = LabelledDataModule(
        fasta_by_label=paths, max_length=64, cache_dir=str(tmp_path / "cache"), rc_aug=False
    )
    module.check_files()
    assert module.class_names() == ["a", "b", "tiny"]
    regions: dict[tuple[str, str], dict[str, list[tuple[int, int]]]] = {}
    for split in ("train", "valid", "test"):
        dataset = module.heldout_dataset(split) if split != "train" else module.dataset_of(split)
        for i in range(len(dataset)):
            name, chrom, start, end = dataset.window(i)
            assert module.class_names()[int(dataset[i]["labels"])] == name
            assert dataset.item_name(i) == f"{name}|{chrom}:{start}-{end}"
            regions.setdefault((name, chrom), {}).setdefault(split, []).append((start, end))
    for (name, chrom), by_split in regions.items():
        spans = {s: (min(w[0] for w in ws), max(w[1] for w in ws)) for s, ws in by_split.items()}
        order = [s for s in ("train", "valid", "test") if s in spans]
        for earlier, later in zip(order, order[1:], strict=False):
            # each split is one stretch of the record, after the earlier split's: windows of
            # two splits never overlap nor interleave (a random split would interleave them)
            assert spans[earlier][1] <= spans[later][0], (name, chrom, spans)
        starts = sorted(w for ws in by_split.values() for w in ws)
        assert all(a[1] <= b[0] for a, b in zip(starts, starts[1:], strict=False))
    assert module.class_counts("valid")[2] == module.class_counts("test")[2] == 0
    tiny_line = class_count_lines(module)[2]
    assert "tiny" in tiny_line and "WARNING: no sequence in valid, test" in tiny_line


def test_labelled_module_needs_exactly_one_source():
    with pytest.raises(ValueError, match="exactly one"):
        LabelledDataModule()
    with pytest.raises(ValueError, match="exactly one"):
        LabelledDataModule(root="r", task="t", fasta_by_label={"a": "a.fa"}, max_length=8)


# ----------------------------------------------------------------------------- the two NELBOs


class Recording(MDLM):
    """MDLM that records the labels every loss call is given."""

    def __init__(self) -> None:
        super().__init__(mask_id=TOK.mask_id, pad_id=TOK.pad_id)
        self.seen: list[torch.Tensor | None] = []

    def loss(self, model, input_ids, generator=None, shard=None, labels=None):
        self.seen.append(None if labels is None else labels.clone())
        return super().loss(model, input_ids, generator, shard, labels)


def test_score_windows_scores_the_true_labels_then_the_null_label_on_the_same_draws():
    module = LabelledDataModule(root=str(TASK.parent), task=TASK.name)
    dataset = module.heldout_dataset("test")
    indices = [0, 70, 119]
    backbone = Caduceus(d_model=8, n_layer=1, vocab_size=12, num_classes=2).eval()
    objective = Recording()
    sums, counts, null_sums = score_windows(objective, backbone, dataset, indices, 2, 0, 8, None, 2)
    truth = torch.tensor([int(dataset[i]["labels"]) for i in indices])
    assert torch.equal(objective.seen[0], truth.repeat(2))
    assert (objective.seen[1] == 2).all()
    assert null_sums is not None and not np.allclose(sums, null_sums)
    # the same noise draws: with a label that the network ignores the two NELBOs coincide
    with torch.no_grad():
        backbone.backbone.label_embedding.embedding.weight.zero_()
    again, _, null_again = score_windows(Recording(), backbone, dataset, indices, 2, 0, 8, None, 2)
    np.testing.assert_allclose(again, null_again, rtol=1e-6)


# ----------------------------------------------------------------------------- end to end

TINY_RUN = [
    "model.d_model=16",
    "model.n_layer=1",
    "data.batch_size=8",
    "data.eval_batch_size=16",
    "objective.eval_t_samples=1",
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "trainer.limit_val_batches=1",
    "trainer.limit_test_batches=1",
    "trainer.enable_progress_bar=false",
    "samples.num_samples=1",
    "samples.steps=4",
]


def test_a_tiny_conditional_demo_trains_evaluates_twice_exports_and_shows_its_classes(
    tmp_path, capsys
):
    out = tmp_path / "run"
    config = str(ROOT / "configs" / "conditional_demo.yaml")
    genodiff.train(config, TINY_RUN, output_dir=out)
    printed = capsys.readouterr().out
    assert "class 0 human  train 225, valid 25, test 60" in printed
    assert "class 1 phage  train 225, valid 25, test 60" in printed
    metrics = (out / "logs" / "version_0" / "metrics.csv").read_text().splitlines()[0]
    assert {"val/nelbo", "val/nelbo_unconditional", "test/nelbo_unconditional"} <= set(
        metrics.split(",")
    )
    checkpoint = out / "checkpoints" / "last.ckpt"
    export = tmp_path / "export"
    assert cli.main(["export", "--checkpoint", str(checkpoint), "--out", str(export)]) == 0
    assert json.loads((export / "config.json").read_text())["num_classes"] == 2
    record = json.loads((export / "genodiff.json").read_text())
    assert record["config"]["conditioning"]["labels"] == ["human", "phage"]
    results = []
    for source in (checkpoint, export):
        capsys.readouterr()
        args = ["eval", "--checkpoint", str(source), "--num-windows", "6", "--json"]
        assert cli.main(args) == 0
        results.append(json.loads(capsys.readouterr().out))
    for result in results:
        assert result["classes"] == ["human", "phage"]
        assert math.isfinite(result["nelbo"]) and math.isfinite(result["nelbo_unconditional"])
        assert result["nelbo"] != result["nelbo_unconditional"]
    assert results[0]["nelbo_unconditional"] == pytest.approx(results[1]["nelbo_unconditional"])
    # Model.class_windows, what bench/ship_model.py's card samples each class against: that
    # class's test files.
    ship_model, model = load_bench_script("ship_model"), genodiff.load(export)
    by_class = model.class_windows("test")
    assert list(by_class) == ["human", "phage"]
    for name in ("human", "phage"):
        files = sorted((TASK / "test" / name).glob("*.txt"))
        assert sorted(by_class[name]) == sorted(f.read_text().strip().upper() for f in files)
    # Its steering verdict: real windows of a class stand in for samples steered to it (each
    # is nearest its own class); under the other class's label the row says which is nearest.
    stand_ins = {
        ("human", 1.0): by_class["human"][:20],
        ("phage", 2.0): by_class["phage"][:20],
        ("phage", 1.0): by_class["human"][20:40],
    }
    table = ship_model.steering_section(stand_ins, by_class, "ACGT", seed=0)
    assert "| human | 1 | " in table and table.count(" | yes |") == 2
    assert table.rstrip().endswith("| no: human |")
    drawn = ship_model.class_samples(model, 2, seed=0)  # every class at every strength
    assert sorted(drawn) == [(c, g) for c in ("human", "phage") for g in ship_model.GAMMAS]
    assert all(len(samples) == 2 for samples in drawn.values())
    for source in (checkpoint, export):
        capsys.readouterr()
        assert cli.main(["info", str(source)]) == 0
        assert "classes:     human, phage (+ the null label: p(x))" in capsys.readouterr().out


def test_class_windows_of_a_model_without_classes_says_so():
    with pytest.raises(InputValueError, match="not trained on labelled data: it has no classes"):
        genodiff.load("mdlm-chrx", device="cpu").class_windows("test")


def test_the_species_bundle_is_what_data_readme_records():
    import hashlib

    readme = (ROOT / "data" / "README.md").read_text()
    for name in ("e_coli_536.fa.gz", "s_aureus_n315.fa.gz"):
        path = ROOT / "data" / "species" / name
        assert hashlib.sha256(path.read_bytes()).hexdigest() in readme
        with gzip.open(path, "rt") as stream:
            assert set("".join(stream.read().split("\n")[1:])) <= set("ACGT")


def test_a_labelled_modules_windows_are_the_bases_of_every_class(tmp_path):
    """``Model.windows`` of a class-conditional run: every sequence of the split, of every
    class, as its file holds it (was: a KeyError, the genome modules' code on labelled data)."""
    rng = np.random.default_rng(1)
    records = {
        name: {f"{name}1": "".join(rng.choice(list("ACGTacgt"), 900))} for name in ("a", "b")
    }
    for name, seqs in records.items():
        write_fasta(tmp_path / f"{name}.fa", seqs)
    paths = {name: str(tmp_path / f"{name}.fa") for name in records}
    fasta = LabelledDataModule(fasta_by_label=paths, max_length=64, rc_aug=False,
                               cache_dir=str(tmp_path / "cache"))  # fmt: skip
    dataset = fasta.heldout_dataset("test")
    expected = []
    for i in range(len(dataset)):
        name, chrom, start, end = dataset.window(i)
        expected.append(records[name][chrom][start:end].upper())  # from the records written
    assert fasta.window_texts("test") == expected and len(expected) >= 2
    assert {dataset.window(i)[0] for i in range(len(dataset))} == {"a", "b"}

    benchmark = LabelledDataModule(root=str(TASK.parent), task=TASK.name, valid_fraction=0.1)
    texts = benchmark.window_texts("test")
    files = sorted((TASK / "test").glob("*/*.txt"))
    assert sorted(texts) == sorted(f.read_text().strip().upper() for f in files)


def test_each_class_file_of_a_conditional_run_has_its_own_sampling_progress(tmp_path, capsys):
    # One progress line served the test scoring and every class's sampling: the first line of
    # a class's sampling showed the clock of all that came before it, the second class's first
    # step went unreported (drawn "lately"), and its rate counted from the first class's start.
    runs = [o for o in TINY_RUN if o != "trainer.enable_progress_bar=false"]
    genodiff.train(str(ROOT / "configs" / "conditional_demo.yaml"), runs, tmp_path, progress=True)
    lines = [
        line
        for line in capsys.readouterr().err.splitlines()
        if line.startswith("genodiff train: sampling steps")
    ]
    firsts = [line for line in lines if line.startswith("genodiff train: sampling steps 1/")]
    lasts = [line for line in lines if "(100%)" in line]
    assert len(firsts) == len(lasts) == 2, lines  # one file per class: human, phage
    assert all("steps/s" not in line for line in firsts), firsts  # no rate before a 2nd step
