"""`genodiff gen-ppl`: generative perplexity against an explicit next-token loop, diversity
against hand-computed values, sample readers, and the command line."""

import gzip
import json
import math
import shutil

import numpy as np
import pytest
import torch

from genodiff import cli, registry
from genodiff.checkpoints import load_model
from genodiff.errors import InputValueError
from genodiff.generative_perplexity import (
    Diversity,
    default_ar_checkpoints,
    distinct_n,
    encode_samples,
    generative_perplexity,
    unigram_entropy,
)
from genodiff.model import GenerativeModel
from genodiff.objectives import AR
from genodiff.sample_files import read_samples, write_samples
from genodiff.sample_formats import SamplingRun
from genodiff.scorers import SampleScorer
from genodiff.tokenizers import CHECKPOINT_KEY, DNATokenizer, tokenizer_record

TOK = DNATokenizer()
DATA = {"name": "fasta", "max_length": 32}
NO_EMA = {"decay": 0.0}


def save(model: GenerativeModel, path) -> str:
    """The checkpoint dict ``load_model`` reads, as a Lightning Trainer writes it."""
    torch.save(
        {
            "hyper_parameters": {"config": model.config},
            "state_dict": model.state_dict(),
            CHECKPOINT_KEY: tokenizer_record(model.tokenizer),
        },
        path,
    )
    return str(path)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A tiny AR Mamba (random weights, spread out so predictions are far from uniform) and a
    tiny MDLM Caduceus."""
    folder = tmp_path_factory.mktemp("ckpt")
    torch.manual_seed(0)
    ar = GenerativeModel(
        {
            "model": {"name": "mamba", "d_model": 16, "n_layer": 1},
            "objective": {"name": "ar"},
            "data": DATA,
            "ema": NO_EMA,
        }
    )
    with torch.no_grad():
        for p in ar.backbone.parameters():
            p.add_(0.3 * torch.randn_like(p))
    mdlm = GenerativeModel(
        {
            "model": {"name": "caduceus", "d_model": 16, "n_layer": 1},
            "objective": {"name": "mdlm"},
            "data": DATA,
            "ema": NO_EMA,
        }
    )
    return {"ar": save(ar, folder / "ar.ckpt"), "mdlm": save(mdlm, folder / "mdlm.ckpt")}


def random_dna(lengths, seed) -> list[str]:
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(list("ACGT"), size=n)) for n in lengths]


@torch.no_grad()
def reference_nll(backbone, text: str, max_length: int, stride: int) -> tuple[float, int]:
    """(NLL in nats, scored tokens) of one sample by an explicit loop over its tokens: token i
    of the first ``max_length`` is read after [BOS] + the tokens before it; a later token i
    after the tokens from k * stride on, k the first window (start k * stride, length
    ``max_length``) that reaches past i, so never less than max_length - stride tokens of
    context (with stride = max_length: after [BOS]). N is context ([PAD], as training stores
    it), never a target."""
    ids = [TOK.pad_id if c == "N" else TOK.token_to_id[c] for c in text]
    total, count = 0.0, 0
    for i, target in enumerate(ids):
        if target == TOK.pad_id:
            continue
        if i < max_length:
            context = [TOK.bos_id, *ids[:i]]
        else:
            k = next(k for k in range(1, i + 1) if k * stride + max_length > i)
            fresh = [TOK.bos_id] if stride == max_length else []  # no overlap: no context
            context = [*fresh, *ids[k * stride : i]]
        log_p = backbone(torch.tensor([context]))[0, -1].double().log_softmax(-1)
        total -= float(log_p[target])
        count += 1
    return total, count


def expected_stats(backbone, samples, max_length, stride=None):
    stride = max_length // 2 if stride is None else stride
    rows = [reference_nll(backbone, s, max_length, stride) for s in samples]
    sums = np.array([s for s, _ in rows])
    counts = np.array([n for _, n in rows], dtype=float)
    ratio = sums.sum() / counts.sum()
    n = len(rows)
    se = math.sqrt(((sums - ratio * counts) ** 2).sum() / (n * (n - 1))) / counts.mean()
    return sums, counts, ratio, se


# --------------------------------------------------------------------------- diversity


def test_unigram_entropy_by_hand():
    # p = (1/2, 1/4, 1/4): H = 1/2 ln 2 + 2 * 1/4 ln 4 = 1.5 ln 2
    assert unigram_entropy([7, 7, 8, 9]) == pytest.approx(1.5 * math.log(2))
    assert unigram_entropy([5, 5, 5]) == 0.0
    assert unigram_entropy([1, 2, 3, 4]) == pytest.approx(math.log(4))


def test_distinct_n_by_hand_and_ngrams_never_span_two_sequences():
    seqs = [[1, 2, 1, 2], [1, 2, 3]]
    assert distinct_n(seqs, 1) == pytest.approx(3 / 7)  # {1, 2, 3} of 7 tokens
    # (1,2) (2,1) (1,2) | (1,2) (2,3): 3 distinct of 5; across the boundary (2,1) would add one
    assert distinct_n(seqs, 2) == pytest.approx(3 / 5)
    assert distinct_n(seqs, 3) == pytest.approx(1.0)  # (1,2,1) (2,1,2) | (1,2,3)
    assert distinct_n(seqs, 4) == pytest.approx(1.0)  # (1,2,1,2) only
    assert distinct_n(seqs, 5) is None
    stats = Diversity.of([np.array(s) for s in seqs])
    assert stats.entropy == pytest.approx((math.log(2) + math.log(3)) / 2)
    assert (stats.sequences, stats.tokens) == (2, 7)
    assert (stats.distinct_1, stats.distinct_2) == (pytest.approx(3 / 7), pytest.approx(3 / 5))


# --------------------------------------------------------------------------- Gen PPL


def test_gen_ppl_equals_an_explicit_next_token_loop(checkpoints):
    model = load_model(checkpoints["ar"])
    samples = random_dna([5, 20, 32, 45], seed=1)  # 45 > max_length 32: two windows
    result = generative_perplexity(samples, model, batch_size=3)
    sums, counts, ratio, se = expected_stats(model.eval_backbone, samples, 32)
    assert result.max_length == 32  # the checkpoint's data.max_length
    assert (result.samples, result.tokens, result.chunks, result.stride) == (4, 102, 5, 16)
    assert result.nll == pytest.approx(ratio, rel=1e-5)
    assert result.gen_ppl == pytest.approx(math.exp(ratio), rel=1e-5)
    assert abs(result.nll - math.log(16)) > 0.05  # the weights are far from uniform
    assert result.nll_se == pytest.approx(se, rel=1e-3)
    assert result.gen_ppl_se == pytest.approx(math.exp(ratio) * se, rel=1e-3)
    per_sample = np.exp(sums / counts)
    assert result.per_sample_ppl_mean == pytest.approx(per_sample.mean(), rel=1e-5)
    assert result.per_sample_ppl_se == pytest.approx(per_sample.std(ddof=1) / 2, rel=1e-4)
    same = generative_perplexity(samples, model, batch_size=1)
    assert same.nll == pytest.approx(result.nll, rel=1e-5)  # padding in a batch changes nothing


@pytest.mark.parametrize(("stride", "windows"), [(4, 4), (5, 4), (8, 3)])
def test_windows_beyond_max_length_score_every_token_once_in_context(checkpoints, stride, windows):
    model = load_model(checkpoints["ar"])
    samples = random_dna([19, 8, 3], seed=2)
    samples[0] = samples[0][:6] + "NN" + samples[0][8:]  # N: context only
    result = generative_perplexity(samples, model, batch_size=2, max_length=8, stride=stride)
    _, counts, ratio, _ = expected_stats(model.eval_backbone, samples, 8, stride)
    # 19 tokens: starts 0, 4, 8, 12 (stride 4); 0, 5, 10, 15 (5); 0, 8, 16 (8: no overlap, a
    # window that starts afresh is read after [BOS])
    assert result.chunks == windows + 1 + 1
    assert result.tokens == counts.sum() == 30 - 2
    assert result.context_only_tokens == 2
    assert result.nll == pytest.approx(ratio, rel=1e-5)


def test_diversity_of_samples_and_reference(checkpoints):
    model = load_model(checkpoints["ar"])
    result = generative_perplexity(["AAAA", "ACGT"], model, reference=["ACGTACGT"])
    d, r = result.diversity, result.reference_diversity
    assert d.entropy == pytest.approx((0 + math.log(4)) / 2)
    assert d.distinct_1 == pytest.approx(4 / 8)
    assert d.distinct_2 == pytest.approx(4 / 6)  # AA AA AA | AC CG GT
    assert d.distinct_4 == pytest.approx(2 / 2)
    # the reference as the samples are: windows of their 4 bp, ACGT | ACGT
    assert (r.sequences, r.tokens) == (2, 8)
    assert r.entropy == pytest.approx(math.log(4))
    assert r.distinct_1 == pytest.approx(4 / 8)
    assert r.distinct_2 == pytest.approx(3 / 6)  # AC CG GT | AC CG GT
    assert r.distinct_3 == pytest.approx(2 / 4)
    assert result.per_sample_ppl_se is not None and result.nll_se is not None


def test_the_reference_is_measured_in_windows_like_the_samples_without_n(checkpoints):
    """A chromosome-long reference record is cut into windows of the samples' length; those
    holding N (read as context, never generated) are left out, and as many windows as there
    are samples are taken, spread evenly: a distinct-n of a million tokens against a few
    thousand, or an entropy that counts N, compares nothing."""
    model = load_model(checkpoints["ar"])
    windows = ["AAAA", "NNNN", "CCCC", "ACNT", "GGGG", "TTTT", "ACGT"]  # 5 without N
    samples = ["ACGT", "TGCA", "AATT"]
    result = generative_perplexity(samples, model, reference=["".join(windows) + "AC"])
    r = result.reference_diversity
    assert (r.sequences, r.tokens) == (3, 12)  # the 1st, 3rd and 5th of the 5 without N
    assert r.entropy == pytest.approx(math.log(4) / 3)  # AAAA, GGGG, ACGT: (0 + 0 + ln 4) / 3
    assert r.distinct_1 == pytest.approx(4 / 12)
    with pytest.raises(InputValueError, match="no window of 4 tokens without"):
        generative_perplexity(samples, model, reference=["ACNTACGN"])


def test_a_diffusion_checkpoint_is_refused(checkpoints):
    model = load_model(checkpoints["mdlm"])
    with pytest.raises(ValueError, match="exact-likelihood.*'mdlm'"):
        generative_perplexity(["ACGT"], model)


def test_bad_samples_are_named(checkpoints):
    model = load_model(checkpoints["ar"])
    with pytest.raises(ValueError, match="sample 1: cannot tokenize character 'X'"):
        generative_perplexity(["ACGT", "ACXT"], model)
    with pytest.raises(ValueError, match="no sample holds a token"):
        generative_perplexity(["NNN"], model)
    with pytest.raises(InputValueError, match="max_length must be >= 1, got 0") as caught:
        generative_perplexity(["ACGT"], model, max_length=0)
    assert caught.value.parameter == "max_length"


# --------------------------------------------------------------------------- readers


def test_readers_round_trip_what_genodiff_sample_writes(tmp_path):
    texts = random_dna([12, 12, 12], seed=3)
    ids = torch.tensor([TOK.encode(t) for t in texts])
    run = SamplingRun(checkpoint="x.ckpt", sampler="ancestral", steps=8, seed=0)
    for name in ("s.fa", "s.fasta", "s.txt", "s.jsonl"):
        assert read_samples(write_samples(ids, tmp_path / name, run, TOK)) == texts
    with gzip.open(tmp_path / "s.fa.gz", "wt") as handle:
        handle.write((tmp_path / "s.fa").read_text())
    assert read_samples(tmp_path / "s.fa.gz") == texts
    # In a .txt file every line is a sample, a blank one an empty sample (as a text model's
    # sample that ends at once is written): none is dropped, so none after it moves up.
    (tmp_path / "blank.txt").write_text("\nACGT\n\n  \nGGCC  \n")
    assert read_samples(tmp_path / "blank.txt") == ["", "ACGT", "", "", "GGCC"]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("s.csv", "ACGT\n", "unknown sample file format '.csv'"),
        ("s", "ACGT\n", "unknown sample file format '\\(no suffix\\)'"),
        ("s.txt", "", "holds no sample"),
        ("s.txt", "\n \n", "holds no sample: its 2 samples are empty"),
        ("s.fa", "", "holds no sample"),
        ("s.fa", "ACGT\n", "is not FASTA"),
        ("s.fa", ">a\n>b\nACGT\n", "record 'a' has no sequence"),
        ("s.jsonl", '{"text": "ACGT"}\n{"text": "AC"\n', "line 2: invalid JSON"),
        ("s.jsonl", '{"id": "a"}\n', 'line 1: expected a JSON object with a string "text"'),
        ("s.jsonl", '\n{"text": ""}\n', "holds no sample: its 1 samples are empty"),
    ],
)
def test_reader_errors(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        read_samples(path)


def test_missing_sample_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        read_samples(tmp_path / "none.fa")


# --------------------------------------------------------------------------- command line


def test_cli_end_to_end(checkpoints, tmp_path, capsys):
    samples = random_dna([40, 40, 40], seed=4)
    (tmp_path / "s.fa").write_text("".join(f">s{i}\n{s}\n" for i, s in enumerate(samples)))
    (tmp_path / "real.txt").write_text("ACGTACGT\n")
    ckpt = checkpoints["ar"]
    base = ["gen-ppl", str(tmp_path / "s.fa"), "--checkpoint", ckpt, "--batch-size", "2"]
    capsys.readouterr()
    assert cli.main([*base, "--reference", str(tmp_path / "real.txt"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    model = load_model(ckpt)
    _, _, ratio, _ = expected_stats(model.eval_backbone, samples, 32)
    assert out["gen_ppl"] == pytest.approx(math.exp(ratio), rel=1e-5)
    assert (out["samples"], out["tokens"], out["chunks"], out["objective"]) == (3, 120, 6, "ar")
    assert out["scoring"] == AR.scoring  # the convention the tokens were scored under
    assert set(out["diversity"]) >= {"entropy", "distinct_1", "distinct_4"}
    assert out["reference_diversity"]["distinct_2"] == pytest.approx(4 / 7)

    assert cli.main([*base, "--max-length", "16"]) == 0
    text = capsys.readouterr().out
    for field in ("Gen PPL", "per-sample PPL", "entropy (nats)", "distinct-4", "<= 16"):
        assert field in text


def test_cli_stride_sets_the_overlap_and_is_checked(checkpoints, tmp_path, capsys):
    samples = random_dna([40, 19], seed=5)
    (tmp_path / "s.fa").write_text("".join(f">s{i}\n{s}\n" for i, s in enumerate(samples)))
    base = ["gen-ppl", str(tmp_path / "s.fa"), "--checkpoint", checkpoints["ar"], "--json"]
    backbone = load_model(checkpoints["ar"]).eval_backbone
    capsys.readouterr()
    # window starts 0, s, 2s, ... until one reaches the end: 40 and 19 tokens
    for stride, chunks in ((3, 12 + 5), (8, 5 + 3), (None, 9 + 4)):  # default: 8 // 2 = 4
        extra = [] if stride is None else ["--stride", str(stride)]
        assert cli.main([*base, "--max-length", "8", *extra]) == 0
        out = json.loads(capsys.readouterr().out)
        _, _, ratio, _ = expected_stats(backbone, samples, 8, stride)
        assert (out["stride"], out["chunks"]) == (stride or 4, chunks)
        assert out["nll"] == pytest.approx(ratio, rel=1e-5)
    for bad, message in (
        (["--stride", "0"], "stride must be >= 1, got 0 (--stride)"),
        (
            ["--max-length", "8", "--stride", "9"],
            "at most the window (max_length 8), got 9 (--stride, --max-length)",
        ),
        # the checkpoint's window
        (["--stride", "33"], "stride must be in [1, 32] (the window), got 33 (--stride)"),
    ):
        assert cli.main([*base, *bad]) == 2
        assert capsys.readouterr().err.strip().endswith(message)
    with pytest.raises(SystemExit):
        cli.main(["gen-ppl", "--help"])
    assert "default: half the window" in " ".join(capsys.readouterr().out.split())


def test_cli_default_checkpoint_and_errors(checkpoints, tmp_path, capsys, monkeypatch):
    (tmp_path / "s.fa").write_text(">a\nACGTACGTAC\n")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert cli.main(["gen-ppl", "s.fa"]) == 2
    err = capsys.readouterr().err
    assert "outputs/hg38_ar_mamba/checkpoints/last.ckpt" in err and "genodiff train" in err
    assert "`genodiff models` lists" in err  # the AR models that load by name (ar-chrx ships)
    assert err.strip().endswith("(--checkpoint)")

    # FASTA is the DNA domain's: its conventional AR run alone
    assert default_ar_checkpoints("s.fa") == ["outputs/hg38_ar_mamba/checkpoints/last.ckpt"]
    default = tmp_path / "outputs/hg38_ar_mamba/checkpoints/last.ckpt"
    default.parent.mkdir(parents=True)
    shutil.copyfile(checkpoints["ar"], default)
    assert cli.main(["gen-ppl", "s.fa", "--json"]) == 0
    captured = capsys.readouterr()
    assert "outputs/hg38_ar_mamba/checkpoints/last.ckpt" in captured.err
    assert json.loads(captured.out)["tokens"] == 10

    assert cli.main(["gen-ppl", "missing.fa", "--checkpoint", checkpoints["ar"]]) == 2
    assert "missing.fa not found" in capsys.readouterr().err
    default.unlink()  # no --checkpoint and none to default to: the missing samples named first
    assert cli.main(["gen-ppl", "missing.fa"]) == 2
    err = capsys.readouterr().err
    assert "sample file missing.fa not found" in err and "conventional AR" not in err
    assert cli.main(["gen-ppl", "s.fa", "--checkpoint", checkpoints["mdlm"]]) == 2
    assert "exact-likelihood" in capsys.readouterr().err


class UniformScorer(SampleScorer):
    """A scorer a plugin could register under any name: model ``uniform-N`` gives every token
    probability 1/N, so Gen PPL is N and every character of a sample is a scored token."""

    default_model = "uniform-4"
    description = "every token equally likely"
    domain = None

    def __init__(self, model: str, device: torch.device) -> None:
        self.size = int(model.removeprefix("uniform-"))
        self.name, self.objective, self.scoring = model, "uniform", "every token, 1/N"
        self.pad_id, self.default_max_length, self.device = 0, 8, device

    def encode(self, text: str) -> list[int]:
        return [1 + ord(c) % self.size for c in text]

    def window_nll(self, ids, lengths, continues):
        positions = torch.arange(ids.shape[1])[None, :].expand_as(ids)  # (B, W)
        nll = torch.full(ids.shape, math.log(self.size), dtype=torch.float64)
        return nll, positions < lengths[:, None], positions


class NoDefaultScorer(UniformScorer):
    default_model = None


def test_a_scorer_registered_under_any_name_scores_with_its_default_model(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(registry._REGISTRIES["scorer"], "uniform", UniformScorer)
    samples = tmp_path / "s.txt"
    samples.write_text("abcdefghij\nklm\n")
    base = ["gen-ppl", str(samples), "--scorer", "uniform", "--device", "cpu", "--json"]
    for extra, size in (([], 4), (["--scorer-model", "uniform-7"], 7)):
        assert cli.main([*base, *extra]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["checkpoint"] == f"uniform-{size}" and out["tokens"] == 13
        assert out["gen_ppl"] == pytest.approx(size, rel=1e-12)


def test_scorer_options_are_checked_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(registry._REGISTRIES["scorer"], "uniform", UniformScorer)
    monkeypatch.setitem(registry._REGISTRIES["scorer"], "bare", NoDefaultScorer)
    samples = tmp_path / "s.txt"
    samples.write_text("the cat sat\n")
    for args, message, option in (
        (["--scorer-model", "uniform-3"], "'uniform-3' names the model of a scorer", "--scorer"),
        (["--scorer", "nope"], "scorer 'nope': no such scorer (registered: ", "--scorer"),
        (["--scorer", "bare"], "scorer 'bare' has no default model", "--scorer-model"),
    ):
        assert cli.main(["gen-ppl", str(samples), *args]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1
        assert err.endswith(f"({option})")
        if "nope" in args:  # every registered scorer, with its description
            assert "uniform (every token equally likely)" in err
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["gen-ppl", "s.txt", "--scorer", "x", "--checkpoint", "a"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_a_scorer_without_a_plugin_that_provides_it_says_what_to_install(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(registry._REGISTRIES, "scorer", {})
    monkeypatch.setattr(registry, "_entry_points", lambda kind: [])  # no plugin installed
    (tmp_path / "s.txt").write_text("the cat sat\n")
    assert cli.main(["gen-ppl", str(tmp_path / "s.txt"), "--scorer", "hf"]) == 2
    err = capsys.readouterr().err.strip()
    assert "(registered: none)" in err and len(err.splitlines()) == 1
    assert "pip install 'genodiff-text[hub]'" in err


def test_an_empty_dna_sample_is_named_as_such(tmp_path):
    # A blank line of a .txt file is an empty sample; a DNA sample has no [BOS], so it holds
    # no token at all: the error says why, rather than leaving the user to guess.
    (tmp_path / "s.txt").write_text("ACGT\n\nGGCC\n")

    class DNAEncoding:
        encode = staticmethod(TOK.encode_sample)

    with pytest.raises(InputValueError, match=r"^sample 1 encodes to no token \(it is empty"):
        encode_samples(read_samples(tmp_path / "s.txt"), DNAEncoding())


def test_a_gzipped_output_is_refused_saying_samples_are_written_uncompressed(tmp_path):
    ids = torch.tensor([TOK.encode("ACGT")])
    run = SamplingRun(checkpoint="x.ckpt", sampler="ancestral", steps=8, seed=0)
    with pytest.raises(InputValueError, match="samples are written uncompressed") as caught:
        write_samples(ids, tmp_path / "s.fa.gz", run, TOK)  # was "unknown output format '.gz'"
    assert caught.value.parameter == "out" and not (tmp_path / "s.fa.gz").exists()
