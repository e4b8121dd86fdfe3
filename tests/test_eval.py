"""`genodiff eval`: held-out NELBO / perplexity against independent recomputations."""

import gzip
import hashlib
import json
import math
import re

import numpy as np
import pytest
import torch

import genodiff
from genodiff import cli
from genodiff.data.datamodule import DEMO_FASTA
from genodiff.data.overlap import TrainingOverlap
from genodiff.data.windows import FastaWindowDataset
from genodiff.tokenizers import DNATokenizer
from genodiff.training.module import GenerativeTrainingModule
from tests.test_bad_input_cli import one_line_error
from tests.test_classifiers_training import write_generator
from tests.test_cli import DEMO, ROOT, TINY

TOK = DNATokenizer()
SMALL = ["model.d_model=16", "model.n_layer=1"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Two tiny models trained for 4 steps on the demo genome: MDLM (Caduceus), AR (Mamba)."""
    mdlm, ar = tmp_path_factory.mktemp("mdlm"), tmp_path_factory.mktemp("ar")
    genodiff.train(DEMO, [*TINY, *SMALL], output_dir=mdlm)
    ar_overrides = ["data=demo", "trainer=cpu", *[o for o in TINY if not o.startswith("model=")]]
    config = str(ROOT / "configs" / "hg38_ar_mamba.yaml")
    genodiff.train(config, [*ar_overrides, *SMALL], output_dir=ar)
    return {name: run / "checkpoints" / "last.ckpt" for name, run in (("mdlm", mdlm), ("ar", ar))}


def seed_words(*entropy: int) -> int:
    """The first 64-bit word of NumPy's SeedSequence(entropy)."""
    return int(np.random.SeedSequence(list(entropy)).generate_state(1, np.uint64)[0])


def run_eval(capsys, checkpoint, *args) -> dict:
    capsys.readouterr()
    assert cli.main(["eval", "--checkpoint", str(checkpoint), "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)  # stdout holds exactly one JSON object


def test_json_nelbo_equals_a_recomputation_on_the_same_windows_and_seed(checkpoints, capsys):
    args = ["--num-windows", "5", "--t-samples", "3", "--seed", "11", "--batch-size", "2"]
    result = run_eval(capsys, checkpoints["mdlm"], *args, "--per-window")
    assert (result["objective"], result["likelihood"], result["t_samples"]) == ("mdlm", "bound", 3)

    # The windows: 5 evenly spread over the demo genome's test split, as the JSON lists them.
    dataset = FastaWindowDataset(DEMO_FASTA, "test", max_length=128)
    indices = [i * len(dataset) // 5 for i in range(5)]
    listed = [w["window"] for w in result["per_window"]]
    assert listed == ["{}:{}-{}".format(*dataset.window(i)) for i in indices]

    # Recompute with the EMA weights, each window's 3 draws seeded from its tokens as
    # WINDOW_SEEDS documents, whatever the batch (--batch-size 2 above, one window here).
    model = GenerativeTrainingModule.load_from_checkpoint(
        checkpoints["mdlm"], map_location="cpu"
    ).eval()
    objective, process = model.eval_objective, model.eval_objective.process
    per_window, tokens = [], []
    with torch.no_grad():
        for index in indices:
            ids = dataset[index]["input_ids"]  # (L,)
            digest = hashlib.sha256(ids.numpy().astype("<i4").tobytes()).digest()
            key = seed_words(11, int.from_bytes(digest, "little"))
            offset = torch.Generator().manual_seed(key)
            shift = torch.rand((), generator=offset, dtype=torch.float64)
            sums = []
            for k in range(3):
                u = ((shift + k / 3) % 1.0).float()
                t = ((1 - process.sampling_eps) * u + process.sampling_eps).reshape(1)  # (1,)
                stream = torch.Generator().manual_seed(seed_words(key, k))
                draw = torch.rand(len(ids), generator=stream)  # (L,) float32
                masked = process.masked_by(ids[None], t, draw[None])  # (1, L)
                nelbo, _ = objective.nelbo_terms(model.eval_backbone, ids[None], t, masked)
                sums.append(nelbo.double().item())
            per_window.append(sum(sums) / 3)
            tokens.append(int((ids != TOK.pad_id).sum()))
    assert [w["nelbo"] for w in result["per_window"]] == pytest.approx(per_window, rel=1e-6)
    assert [w["tokens"] for w in result["per_window"]] == tokens
    assert result["tokens"] == sum(tokens) and result["windows"] == 5
    assert result["nelbo"] == pytest.approx(sum(per_window) / sum(tokens), rel=1e-6)
    # and another batch size changes nothing
    for batch_size in ("1", "5"):
        again = run_eval(capsys, checkpoints["mdlm"], *args[:-1], batch_size, "--per-window")
        got = [w["nelbo"] for w in again["per_window"]]
        assert got == pytest.approx([w["nelbo"] for w in result["per_window"]], rel=1e-6)


def test_reported_statistics_are_consistent(checkpoints, capsys):
    result = run_eval(capsys, checkpoints["mdlm"], "--num-windows", "6", "--per-window")
    s = np.array([w["nelbo"] for w in result["per_window"]])
    n = np.array([w["tokens"] for w in result["per_window"]], dtype=float)
    ratio = s.sum() / n.sum()
    # Delta method: the ratio's SE is that of the mean of the linearised terms (s - R n) / n̄.
    linearised = (s - ratio * n) / n.mean()
    assert result["nelbo"] == pytest.approx(ratio, rel=1e-9)
    assert result["nelbo_se"] == pytest.approx(linearised.std(ddof=1) / math.sqrt(6), rel=1e-9)
    assert result["perplexity"] == pytest.approx(math.exp(result["nelbo"]), rel=1e-12)
    assert result["perplexity_se"] == pytest.approx(result["perplexity"] * result["nelbo_se"])
    assert result["bits_per_token"] == pytest.approx(result["nelbo"] / math.log(2), rel=1e-12)
    assert result["bits_per_token_se"] == pytest.approx(result["nelbo_se"] / math.log(2))


def test_every_checkpoint_is_scored_on_the_same_windows(checkpoints, capsys):
    args = ["--num-windows", "4", "--t-samples", "2"]
    mdlm = run_eval(capsys, checkpoints["mdlm"], *args)
    mdlm_reseeded = run_eval(capsys, checkpoints["mdlm"], *args, "--seed", "1")
    ar = run_eval(capsys, checkpoints["ar"], *args)
    assert mdlm["windows_sha256"] == mdlm_reseeded["windows_sha256"] == ar["windows_sha256"]
    assert mdlm["tokens"] == ar["tokens"] and mdlm["source"] == ar["source"]
    assert mdlm["nelbo"] != mdlm_reseeded["nelbo"]  # the seed drives the noise draws
    # AR is exact and deterministic: --t-samples does not apply.
    assert (ar["objective"], ar["likelihood"], ar["t_samples"]) == ("ar", "exact", 1)
    # DNA windows start with a base: the AR reads its own [BOS] first and scores every token;
    # [PAD] (N) is never corrupted by MDLM
    assert "[PAD] is never corrupted" in mdlm["scoring"] and "x[1:]" in ar["scoring"]


def test_t_samples_given_to_an_exact_model_is_said_ignored_with_its_option(checkpoints, capsys):
    # Was: "t_samples=2 is ignored: ..." on the command line, a library parameter name that
    # the user typed as --t-samples and that no other genodiff eval line spells that way.
    capsys.readouterr()
    args = ["eval", "--checkpoint", str(checkpoints["ar"]), "--num-windows", "2", "--json"]
    assert cli.main([*args, "--t-samples", "2", "--no-progress"]) == 0
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "warning" in x]
    assert line.startswith("genodiff eval: warning: t_samples=2 is ignored: this model's likel")
    assert line.endswith("(--t-samples)")


@pytest.fixture
def small_fasta(tmp_path):
    rng = np.random.default_rng(0)
    one = "".join(rng.choice(list("ACGTacgt"), 130))  # 2 windows of 50 (tail dropped)
    two = "".join(rng.choice(list("ACGT"), 40)) + "N" * 60 + "".join(rng.choice(list("ACGT"), 60))
    # two: [0, 50) 20% N kept, [50, 100) all N skipped, [100, 150) kept
    path = tmp_path / "small.fa"
    path.write_text(f">one\n{one}\n>two\n{two}\n")
    expected = [one[0:50], one[50:100], two[0:50], two[100:150]]
    return path, expected


def test_fasta_windows_and_exact_ar_nll(checkpoints, capsys, small_fasta):
    path, expected = small_fasta
    args = ["--fasta", str(path), "--length", "50", "--per-window"]
    ar = run_eval(capsys, checkpoints["ar"], *args)
    mdlm = run_eval(capsys, checkpoints["mdlm"], *args)
    assert [w["window"] for w in ar["per_window"]] == [
        "one:0-50",
        "one:50-100",
        "two:0-50",
        "two:100-150",
    ]
    assert ar["windows_sha256"] == mdlm["windows_sha256"] and ar["length"] == 50

    # Exact NLL by hand: tokens read from the strings, [BOS] + x[:-1] -> log-softmax at x.
    model = GenerativeTrainingModule.load_from_checkpoint(
        checkpoints["ar"], map_location="cpu"
    ).eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for seq in expected:
            ids = [TOK.token_to_id[c] for c in seq.upper()]
            inputs = torch.tensor([[TOK.bos_id, *ids[:-1]]])
            log_p = model.eval_backbone(inputs)[0].double().log_softmax(-1)
            scored = [(i, t) for i, t in enumerate(ids) if t != TOK.n_id]
            total -= sum(log_p[i, t].item() for i, t in scored)
            count += len(scored)
    assert ar["tokens"] == count
    assert ar["nelbo"] == pytest.approx(total / count, rel=1e-5)


def test_text_report(checkpoints, capsys, monkeypatch):
    args = ["eval", "--checkpoint", str(checkpoints["ar"]), "--num-windows", "2"]
    capsys.readouterr()
    assert cli.main(args) == 0
    captured = capsys.readouterr()
    assert "NLL (exact)" in captured.out and "perplexity" in captured.out
    assert "scored windows" not in captured.err  # GENODIFF_PROGRESS=0 (tests/conftest.py)
    monkeypatch.delenv("GENODIFF_PROGRESS")  # as by default: plain lines, stderr no terminal
    assert cli.main(args) == 0
    assert "genodiff eval: scored windows 2/2 (100%)" in capsys.readouterr().err
    assert cli.main([*args, "--no-progress"]) == 0
    assert "scored windows" not in capsys.readouterr().err


def test_a_dna_report_says_what_is_scored_in_no_other_domains_words(capsys):
    """Was: "padding, hence a sentence's length, is given" in the report of a DNA model."""
    args = ["eval", "--checkpoint", "mdlm-chrx", "--file", str(DEMO_FASTA), "--length", "64"]
    capsys.readouterr()
    assert cli.main([*args, "--num-windows", "1"]) == 0
    (scored,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("scored")]
    assert "objective.padding=given" in scored and "sequence's length" in scored
    assert "sentence" not in scored


def test_the_files_of_a_labelled_split_are_named_class_by_class(capsys):
    """Was: "from labelled test split of {'human': '/.../chr22_20-21Mb.fa.gz', ...}", a
    Python mapping in the report."""
    capsys.readouterr()
    assert cli.main(["eval", "--checkpoint", "species-conditional", "--num-windows", "3"]) == 0
    (windows,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("wind")]
    data = ROOT / "data"
    files = {
        "human": data / "chr22_20-21Mb.fa.gz",
        "e_coli": data / "species" / "e_coli_536.fa.gz",
        "s_aureus": data / "species" / "s_aureus_n315.fa.gz",
    }
    named = ", ".join(f"{name}={path}" for name, path in files.items())
    assert windows.endswith(f" tokens from labelled test split of {named}"), windows


def eval_with_stderr(capsys, checkpoint, *args) -> tuple[dict, str]:
    capsys.readouterr()
    assert cli.main(["eval", "--checkpoint", str(checkpoint), "--json", *args]) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def trained_share(fasta, scored_length: int, num_windows: int, trained_length: int = 128) -> float:
    """The share of ``num_windows`` evenly spread ``scored_length``-bp windows tiling ``fasta``
    that share a base with a window of the run's train split (the demo run's: 128-bp windows
    of the first 80% of the record), by brute force over every pair."""
    scored = FastaWindowDataset(fasta, "test", scored_length, split_fractions=(0, 0, 1))
    train = FastaWindowDataset(fasta, "train", trained_length, split_fractions=(0.8, 0.1, 0.1))
    trained = [train.window(i) for i in range(len(train))]
    picked = [scored.window(i * len(scored) // num_windows) for i in range(num_windows)]
    hits = [any(c == t[0] and s < t[2] and t[1] < e for t in trained) for c, s, e in picked]
    return sum(hits) / num_windows


def test_scoring_the_training_file_warns_and_flags_the_overlap(checkpoints, capsys):
    args = ["--file", str(DEMO_FASTA), "--length", "100", "--num-windows", "10"]
    result, err = eval_with_stderr(capsys, checkpoints["mdlm"], *args)
    share = trained_share(DEMO_FASTA, 100, 10)
    assert 0.5 < share < 1  # the file's first 80% was trained on, the rest was not
    assert result["overlaps_training_data"] is True
    assert result["training_overlap_share"] == pytest.approx(share)
    (warning,) = result["warnings"]
    assert f"{share:.0%} of the scored windows ({round(share * 10)} of 10)" in warning
    assert "the same file" in warning and "not a held-out likelihood" in warning
    assert "score the run's own test split (no file given)" in warning
    assert "--" not in warning  # the library's words, said by Python as by the command
    assert f"genodiff eval: warning: {warning}" in err  # beside the JSON, on stderr

    capsys.readouterr()  # the text report carries it too
    assert cli.main(["eval", "--checkpoint", str(checkpoints["mdlm"]), *args]) == 0
    assert f"warning       {warning}" in capsys.readouterr().out


def test_a_copy_of_the_training_file_is_recognised_by_its_bytes(checkpoints, capsys, tmp_path):
    copy = tmp_path / "renamed.fa.gz"
    copy.write_bytes(DEMO_FASTA.read_bytes())
    result, _ = eval_with_stderr(capsys, checkpoints["ar"], "--file", str(copy),
                                 "--length", "128", "--num-windows", "5")  # fmt: skip
    assert result["training_overlap_share"] == pytest.approx(trained_share(copy, 128, 5))
    assert "(the same bytes)" in result["warnings"][0]


def test_a_class_file_of_a_conditional_model_is_its_training_data(capsys, tmp_path):
    """Was: ``overlaps_training_data`` false, and no warning, for the very FASTA one class of
    ``species-conditional`` trained on (a mapping of files, ``fasta_by_label``, was passed
    over), by its path and by a copy of its content."""
    e_coli = ROOT / "data" / "species" / "e_coli_536.fa.gz"
    args = ["--file", str(e_coli), "--num-windows", "10", "--t-samples", "1"]
    result, err = eval_with_stderr(capsys, "species-conditional", *args)
    share = trained_share(e_coli, 256, 10, trained_length=256)
    assert 0.5 < share < 1  # each record's first 80% was trained on, the rest was not
    assert result["overlaps_training_data"] is True
    assert result["training_overlap_share"] == pytest.approx(share)
    assert "the same file" in result["warnings"][0] and "genodiff eval: warning: " in err
    copy = tmp_path / "renamed.fa"  # the content, decompressed: the sha256 the model recorded
    copy.write_bytes(gzip.decompress(e_coli.read_bytes()))
    args = ["--file", str(copy), "--num-windows", "5", "--t-samples", "1"]
    result, _ = eval_with_stderr(capsys, "species-conditional", *args)
    assert result["training_overlap_share"] == pytest.approx(trained_share(copy, 256, 5, 256))
    assert "(the same bytes)" in result["warnings"][0]


def test_a_module_that_cannot_tell_which_windows_still_warns():
    overlap = TrainingOverlap("corpus.txt", "path", overlapping=None, windows=5)
    assert overlap.overlaps is None and overlap.share is None  # unknown, not False
    assert "cannot tell which of its windows were trained on" in overlap.warning()
    assert "not a held-out likelihood" in overlap.warning()
    assert TrainingOverlap("g.fa", "path", overlapping=0, windows=5).overlaps is False


def test_held_out_data_does_not_warn(checkpoints, capsys, small_fasta):
    for args in (["--num-windows", "3"], ["--file", str(small_fasta[0]), "--length", "50"]):
        result, err = eval_with_stderr(capsys, checkpoints["mdlm"], *args)
        assert result["overlaps_training_data"] is False and result["warnings"] == []
        assert result["training_overlap_share"] is None and "warning" not in err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--checkpoint", "missing.ckpt"], "not found"),
        (["--num-windows", "0"], "num_windows must be >= 1, got 0 (--num-windows)"),
        (["--length", "200000"], "no 200000-bp window"),
    ],
)
def test_clear_errors(checkpoints, capsys, args, message):
    full = ["eval", "--checkpoint", str(checkpoints["ar"]), *args]
    assert cli.main(full) == 2
    assert message in capsys.readouterr().err


def test_fasta_without_usable_window_is_an_error(checkpoints, capsys, tmp_path):
    path = tmp_path / "ns.fa"
    path.write_text(">n\n" + "N" * 200 + "\n")
    args = ["eval", "--checkpoint", str(checkpoints["ar"]), "--fasta", str(path), "--length", "50"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "no 50-bp window" in err and err.endswith("(--length, --file)")


def test_eval_t_power_replaces_the_checkpoints_and_is_reported(tmp_path, capsys):
    # --eval-t-power 1 on a checkpoint whose config says 2.5 scores exactly as a checkpoint of
    # the same weights whose config says 1; the default (2.5) draws other times
    model = {"name": "caduceus", "d_model": 8, "n_layer": 1, "time_conditioning": True}
    torch.manual_seed(0)
    data = {"name": "fasta", "max_length": 64}
    weighted = write_generator(tmp_path / "weighted.ckpt", None, "udlm", model, data)
    torch.manual_seed(0)
    uniform = write_generator(tmp_path / "u.ckpt", None, "udlm", model, data, eval_t_power=1)
    args = ["--fasta", str(DEMO_FASTA), "--length", "64", "--num-windows", "8", "--t-samples", "2"]
    by_flag = run_eval(capsys, weighted, *args, "--eval-t-power", "1")
    by_config = run_eval(capsys, uniform, *args)
    default = run_eval(capsys, weighted, *args)
    assert by_flag["nelbo"] == pytest.approx(by_config["nelbo"], rel=1e-12)
    assert by_flag["windows_sha256"] == default["windows_sha256"]
    assert abs(by_flag["nelbo"] - default["nelbo"]) > 1e-6
    assert "t = s^1 with importance weights" in by_flag["scoring"]
    assert "t = s^2.5 with importance weights" in default["scoring"]


@pytest.mark.parametrize(
    "objective, power, message",
    [
        ("mdlm", "1", r"holds a model of objective MDLM, whose.*eval_t_power applies to UDLM"),
        ("udlm", "0.5", r"eval_t_power: 0.5 is out of range; set a value at least 1 \(1 = uniform"),
    ],
)
def test_eval_t_power_refusals(tmp_path, capsys, objective, power, message):
    model = {"name": "caduceus", "d_model": 8, "n_layer": 1, "time_conditioning": True}
    checkpoint = write_generator(tmp_path / "g.ckpt", None, objective, model)
    args = ["--checkpoint", str(checkpoint), "--fasta", str(DEMO_FASTA), "--length", "64"]
    assert cli.main(["eval", *args, "--eval-t-power", power]) == 2
    assert re.search(message, one_line_error(capsys, "eval"))


@pytest.mark.parametrize(
    ("likelihood", "measure"), [("exact", "NLL"), ("bound", "NELBO"), ("upstream", "NELBO")]
)
def test_a_conditional_report_names_its_numbers_for_what_they_are(likelihood, measure):
    """A class-conditional AR checkpoint's numbers are exact NLLs, with the true label and
    with the null label; a diffusion checkpoint's are NELBOs (was: "NELBO" for both)."""
    from genodiff.evaluate import EvalResult

    result = EvalResult(
        checkpoint="c.ckpt", objective="ar", likelihood=likelihood, scoring="every base",
        source="test split", length=8, windows=2, tokens=16, t_samples=1, seed=0,
        batch_size=2, nelbo=1.25, nelbo_se=0.5, bits_per_token=1.25 / math.log(2),
        bits_per_token_se=0.5 / math.log(2), perplexity=math.exp(1.25),
        perplexity_se=math.exp(1.25) * 0.5, windows_sha256="0" * 64, classes=["a", "b"],
        nelbo_unconditional=1.5, nelbo_unconditional_se=0.25,
        perplexity_unconditional=math.exp(1.5),
    )  # fmt: skip
    labels = [line[:14].strip() for line in result.describe().splitlines()]
    assert f"{measure} p(x|y)" in labels and f"{measure} p(x)" in labels
    other = {"NLL": "NELBO", "NELBO": "NLL"}[measure]
    assert not any(label.startswith(other) for label in labels)


def test_a_conditional_report_of_a_file_claims_no_true_label(tmp_path, capsys):
    """A file's windows carry no label, so a class-conditional model scores them with the null
    label alone; the report said "NELBO p(x|y) ... (true label)" and then the same number
    again as p(x)."""
    real = tmp_path / "real.fa"
    real.write_text(">real\n" + "ACGGTCAT" * 40 + "\n")  # 320 bp: one 256-bp window
    argv = ["eval", "--checkpoint", "species-conditional", "--file", str(real), "--no-progress"]
    assert cli.main(argv) == 0
    report = capsys.readouterr().out
    labels = [line[:14].strip() for line in report.splitlines()]
    assert labels.count("NELBO p(x)") == 1 and "NELBO p(x|y)" not in labels
    assert "true label" not in report and "a file's windows carry no label" in report
    assert cli.main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["labelled"] is False and result["nelbo"] == result["nelbo_unconditional"]


def test_an_exact_report_claims_no_noise_draws():
    """An AR checkpoint's report said "(1 noise draw(s)/window, seed 0)": it draws none."""
    from genodiff.evaluate import EvalResult

    def report(likelihood: str) -> str:
        result = EvalResult(
            checkpoint="c.ckpt", objective="ar", likelihood=likelihood, scoring="every token",
            source="test split", length=8, windows=2, tokens=16, t_samples=3, seed=5,
            batch_size=2, nelbo=1.25, nelbo_se=0.5, bits_per_token=1.25 / math.log(2),
            bits_per_token_se=0.5 / math.log(2), perplexity=math.exp(1.25),
            perplexity_se=math.exp(1.25) * 0.5, windows_sha256="0" * 64,
        )  # fmt: skip
        (line,) = [row for row in result.describe().splitlines() if row.startswith("objective")]
        return line

    assert "draw(s)/window" not in report("exact") and "exact, no noise draws" in report("exact")
    assert "3 noise draw(s)/window, seed 5" in report("bound")


class _UnknownMostly:
    """A tokenizer stand-in with an unknown token (id 1), [PAD] 0 and [MASK] 2."""

    unk_id, pad_id, mask_id, bos_id, eos_id, domain = 1, 0, 2, None, None, "text"

    def decode(self, ids: list[int]) -> str:
        return "[UNK]"


@pytest.mark.parametrize("given_file", [True, False])
def test_windows_mostly_unknown_name_the_file_only_where_one_was_given(given_file):
    # Was: "...; give a file of its domain (--file)" also for the run's own test split, which
    # no --file named
    from genodiff.errors import InputValueError
    from genodiff.evaluate import HeldoutWindows, unknown_fraction

    dataset = {0: {"input_ids": torch.tensor([1, 1, 1, 3, 0, 0])}}  # 3 of 4 tokens unknown
    windows = HeldoutWindows(dataset, [0], "the windows")
    with pytest.raises(InputValueError) as refused:
        unknown_fraction(windows, _UnknownMostly(), given_file=given_file)
    assert str(refused.value).startswith("75% of the tokens of the windows read as the unknown")
    assert refused.value.parameter == ("data_file" if given_file else None)
    assert ("give a file of its domain" in str(refused.value)) == given_file
