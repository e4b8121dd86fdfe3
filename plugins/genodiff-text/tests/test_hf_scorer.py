"""`genodiff gen-ppl --scorer hf`: text samples scored by a Hugging Face causal LM, against
loops over a tiny GPT-2's logits (built offline in a temporary folder: nothing is downloaded)."""

import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from genodiff_text.hf_scorer import HFCausalLMScorer
from test_text_tokenizers import hub_at, unreachable_hub  # noqa: F401 (a fixture)

from genodiff import cli, registry
from genodiff.errors import InputFileNotFoundError, InputValueError
from genodiff.generative_perplexity import score_samples
from tests.test_hub import FakeHub

transformers = pytest.importorskip("transformers")

VOCAB = ["<|endoftext|>", "[UNK]", "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "."]
IDS = {word: i for i, word in enumerate(VOCAB)}
BOS = IDS["<|endoftext|>"]  # GPT-2's BOS and EOS
CONTEXT = 16  # the tiny model's n_positions
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory) -> str:
    """A folder holding a 2-layer GPT-2 (random weights, spread out so that predictions are
    far from uniform) and a word-level tokenizer with GPT-2's special token."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder = tmp_path_factory.mktemp("tiny_gpt2")
    backend = Tokenizer(models.WordLevel(IDS, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="[UNK]",
    )
    tokenizer.save_pretrained(folder)
    config = transformers.GPT2Config(
        vocab_size=len(VOCAB),
        n_positions=CONTEXT,
        n_embd=16,
        n_layer=2,
        n_head=2,
        bos_token_id=BOS,
        eos_token_id=BOS,
    )
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5 * torch.randn_like(p))
    model.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def scorer(tiny_gpt2) -> HFCausalLMScorer:
    return HFCausalLMScorer(tiny_gpt2, CPU)


def word_ids(sentence: str) -> list[int]:
    return [IDS[w] for w in sentence.split()]


@torch.no_grad()
def full_context_nll(model, ids: list[int]) -> np.ndarray:
    """NLL (nats) of ids[1:], each given every id before it: one call on the whole sequence,
    then a gather of log p(ids[t + 1]) at every position t, in float64."""
    logits = model(torch.tensor([ids])).logits[0].double()  # (n, V)
    log_p = logits.log_softmax(dim=-1)
    return np.array([-float(log_p[t, ids[t + 1]]) for t in range(len(ids) - 1)])


@torch.no_grad()
def windowed_nll(model, ids: list[int], window: int, stride: int) -> np.ndarray:
    """NLL of ids[1:] as sliding windows should score them: token t (t >= 1) in the first
    window (starts 0, stride, 2 stride, ...; each `window` long) that holds it and a token
    before it, given the tokens of that window before it; one model call per token."""
    out = []
    for t in range(1, len(ids)):
        start = next(s for s in range(0, t, stride) if s + window > t)
        logits = model(torch.tensor([ids[start:t]])).logits[0, -1].double()  # next: ids[t]
        out.append(-float(logits.log_softmax(dim=-1)[ids[t]]))
    return np.array(out)


SAMPLES = ["the cat sat on the mat .", "a dog ran", "the dog sat . [SEP] a cat ran on a mat"]


def test_encoding_puts_bos_first_once_and_keeps_sentence_boundaries(scorer):
    assert scorer.encode("the cat sat") == [BOS, *word_ids("the cat sat")]
    # [SEP] (bert, trained tokenizers) and <|endoftext|> (gpt2) between sentences: one EOS
    for marker in ("[SEP]", "<|endoftext|>"):
        text = f"the cat sat . {marker} a dog ran {marker} the mat"
        expected = [BOS, *word_ids("the cat sat ."), BOS, *word_ids("a dog ran")]
        expected += [BOS, *word_ids("the mat")]
        assert scorer.encode(text) == expected
    assert scorer.default_max_length == CONTEXT  # the model's n_positions
    assert scorer.domain == "text"
    assert HFCausalLMScorer.default_model == "gpt2-large"  # the MDLM paper's Gen PPL scorer


def test_nll_equals_a_loop_over_the_models_logits(scorer):
    result = score_samples(SAMPLES, scorer, batch_size=2)  # rows of different lengths padded
    sums, counts = [], []
    for text in SAMPLES:
        sentences = text.split(" [SEP] ")
        ids = [BOS, *word_ids(sentences[0])]
        for sentence in sentences[1:]:
            ids += [BOS, *word_ids(sentence)]
        nll = full_context_nll(scorer.hf_model, ids)
        sums.append(nll.sum())
        counts.append(len(nll))
    ratio = sum(sums) / sum(counts)
    assert result.tokens == sum(counts) == 7 + 3 + (4 + 1 + 6)  # every word, each boundary
    assert result.chunks == 3 and result.max_length == CONTEXT
    assert result.nll == pytest.approx(ratio, rel=1e-6)
    assert result.gen_ppl == pytest.approx(math.exp(ratio), rel=1e-6)
    assert abs(result.nll - math.log(len(VOCAB))) > 0.1  # far from uniform
    per_sample = np.exp(np.array(sums) / np.array(counts))
    assert result.per_sample_ppl_mean == pytest.approx(per_sample.mean(), rel=1e-6)
    assert result.objective == "hf:GPT2LMHeadModel" and "BOS" in result.scoring
    one_at_a_time = score_samples(SAMPLES, scorer, batch_size=1)
    assert one_at_a_time.nll == pytest.approx(result.nll, rel=1e-6)


@pytest.mark.parametrize("stride", [1, 3, 5])
def test_sliding_windows_score_every_token_once_with_the_context_they_hold(scorer, stride):
    text = "the cat sat on the mat . a dog ran on a mat ."  # 14 words: fits the model
    ids = [BOS, *word_ids(text)]
    window = 6
    result = score_samples([text], scorer, max_length=window, stride=stride)
    expected = windowed_nll(scorer.hf_model, ids, window, stride)
    assert result.tokens == len(ids) - 1 == 14
    assert result.nll == pytest.approx(expected.mean(), rel=1e-6)
    full = full_context_nll(scorer.hf_model, ids).mean()
    assert abs(result.nll - full) > 1e-3  # the windows' context is not the whole sample


def test_windows_without_overlap_are_refused(scorer):
    with pytest.raises(InputValueError, match="stride must be below the window") as caught:
        score_samples(["the cat sat on the mat"], scorer, max_length=4, stride=4)
    assert caught.value.parameter == "stride"


def test_a_sample_that_fits_is_scored_with_its_whole_context(scorer):
    text = "the cat sat on the mat . a dog ran"  # 10 words + BOS <= 16
    ids = [BOS, *word_ids(text)]
    full = full_context_nll(scorer.hf_model, ids)
    for stride in (1, 5, CONTEXT - 1):
        result = score_samples([text], scorer, stride=stride)  # window: the model's context
        assert result.chunks == 1 and result.tokens == len(full)
        assert result.nll == pytest.approx(full.mean(), rel=1e-6)


def test_bos_leads_only_the_first_window(scorer, monkeypatch):
    text = " ".join(["the cat sat on the mat ."] * 3)  # 21 words: 3 windows of 16, stride 8
    seen = []
    forward = scorer.hf_model.forward

    def recording(input_ids, attention_mask):
        lengths = attention_mask.sum(dim=1)
        seen.extend(row[: int(n)].tolist() for row, n in zip(input_ids, lengths, strict=True))
        return forward(input_ids=input_ids, attention_mask=attention_mask)

    monkeypatch.setattr(scorer.hf_model, "forward", recording)
    result = score_samples([text], scorer, batch_size=1)
    ids = [BOS, *word_ids(text)]
    assert seen == [ids[0:16], ids[8:22]]
    assert [row.count(BOS) for row in seen] == [1, 0]
    assert result.tokens == 21


def test_gen_ppl_scorer_hf_on_the_command_line(tiny_gpt2, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(registry._REGISTRIES["scorer"], "hf", HFCausalLMScorer)
    samples = tmp_path / "samples.txt"
    samples.write_text("\n".join(SAMPLES) + "\n")
    args = ["gen-ppl", str(samples), "--scorer", "hf", "--scorer-model", tiny_gpt2]
    assert cli.main([*args, "--device", "cpu", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    expected = score_samples(SAMPLES, HFCausalLMScorer(tiny_gpt2, CPU), batch_size=16)
    assert report["checkpoint"] == tiny_gpt2 and report["samples_file"] == str(samples)
    assert report["objective"] == "hf:GPT2LMHeadModel"
    assert report["tokens"] == expected.tokens == 21
    assert report["gen_ppl"] == pytest.approx(expected.gen_ppl, rel=1e-6)
    assert report["scoring"] == expected.scoring


def test_the_installed_plugin_registers_the_hf_scorer():
    assert registry.get("scorer", "hf") is HFCausalLMScorer


def test_without_a_model_the_scorer_loads_its_default_model(tmp_path, capsys, monkeypatch):
    loaded = []

    class Unloadable(HFCausalLMScorer):
        def __init__(self, model_name, device):
            loaded.append(model_name)
            raise InputFileNotFoundError(f"{model_name}: not here", parameter="scorer_model")

    monkeypatch.setitem(registry._REGISTRIES["scorer"], "hf", Unloadable)
    samples = tmp_path / "samples.txt"
    samples.write_text("the cat sat\n")
    assert cli.main(["gen-ppl", str(samples), "--scorer", "hf"]) == 2
    assert loaded == ["gpt2-large"]
    assert capsys.readouterr().err.strip().endswith("gpt2-large: not here (--scorer-model)")


def test_dna_sample_files_are_refused_before_the_model_loads(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(registry._REGISTRIES["scorer"], "hf", HFCausalLMScorer)
    fasta = tmp_path / "samples.fa"
    fasta.write_text(">sample_0_seed0\nACGTACGT\n")
    # a model name that does not exist: the refusal comes before any loading
    args = ["gen-ppl", str(fasta), "--scorer", "hf", "--scorer-model", str(tmp_path / "none")]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "dna sample format" in err and "the hf scorer scores text samples" in err
    assert len(err.splitlines()) == 1


def test_without_transformers_the_hf_scorer_says_what_to_install(
    tiny_gpt2, tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(registry._REGISTRIES["scorer"], "hf", HFCausalLMScorer)
    monkeypatch.setitem(sys.modules, "transformers", None)  # import fails
    samples = tmp_path / "samples.txt"
    samples.write_text("the cat sat\n")
    assert cli.main(["gen-ppl", str(samples), "--scorer", "hf", "--scorer-model", tiny_gpt2]) == 2
    err = capsys.readouterr().err.strip()
    assert "the hf scorer needs transformers: pip install 'genodiff-text[hub]'" in err
    assert len(err.splitlines()) == 1 and err.endswith("(--scorer)")


def test_a_folder_without_a_model_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(registry._REGISTRIES["scorer"], "hf", HFCausalLMScorer)
    samples = tmp_path / "samples.txt"
    samples.write_text("the cat sat\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["gen-ppl", str(samples), "--scorer", "hf", "--scorer-model", str(empty)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"scorer model {empty}: cannot load" in err and len(err.splitlines()) == 1
    assert err.endswith("(--scorer-model)")


def test_an_empty_sample_is_counted_and_scores_no_token(tiny_gpt2, tmp_path, capsys, monkeypatch):
    # A text model's sample that ended at once is a blank line of samples.txt: it is one of
    # the samples (it used to be dropped), with no token to score.
    monkeypatch.setitem(registry._REGISTRIES["scorer"], "hf", HFCausalLMScorer)
    samples = tmp_path / "samples.txt"
    samples.write_text(f"{SAMPLES[0]}\n\n{SAMPLES[1]}\n")
    args = ["gen-ppl", str(samples), "--scorer", "hf", "--scorer-model", tiny_gpt2]
    assert cli.main([*args, "--device", "cpu", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    texts_only = score_samples(SAMPLES[:2], HFCausalLMScorer(tiny_gpt2, CPU), batch_size=16)
    assert report["samples"] == 3
    assert report["tokens"] == texts_only.tokens
    assert report["gen_ppl"] == pytest.approx(texts_only.gen_ppl, rel=1e-6)


class HubWithoutSubfolders(FakeHub):
    """FakeHub, answering a listing of a sub-folder (transformers asks for
    ``additional_chat_templates/``) with "no such entry", as the Hub does."""

    def _find(self, handler, repo: str, revision: str):
        branch, _, subfolder = revision.partition("/")
        if subfolder and (repo, branch) in self.revisions:
            return self._error(handler, 404, "EntryNotFound")
        return super()._find(handler, repo, revision)


@pytest.fixture
def serve_on_localhost(tmp_path, monkeypatch):
    """``serve(folder)`` puts ``folder`` on a Hub stand-in on 127.0.0.1 as ``test-org/served``
    and returns that id, which the scorer then downloads."""
    import huggingface_hub.constants as hub_constants

    hubs = []

    def serve(folder) -> str:
        hub = HubWithoutSubfolders({"test-org/served": {"main": folder}})
        hubs.append(hub)
        hub_at(monkeypatch, hub.url, tmp_path / f"hub-cache-{len(hubs)}")
        template = hub.url + "/{repo_id}/resolve/{revision}/{filename}"
        monkeypatch.setattr(hub_constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
        # transformers keeps one HfApi, holding the endpoint of its first use
        monkeypatch.setattr(transformers.utils.hub, "_hf_api", None)
        monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        return "test-org/served"

    yield serve
    for hub in hubs:
        hub.close()


def gen_ppl_error(model: str, tmp_path, capsys, monkeypatch, sample: str = "the cat sat") -> str:
    monkeypatch.setitem(registry._REGISTRIES["scorer"], "hf", HFCausalLMScorer)
    samples = tmp_path / "samples.txt"
    samples.write_text(f"{sample}\n")
    args = ["gen-ppl", str(samples), "--scorer", "hf", "--scorer-model", model]
    assert cli.main([*args, "--device", "cpu", "--json"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()[-1]
    assert err.startswith("genodiff gen-ppl: error:") and not captured.out
    return err


def test_a_truncated_download_is_a_one_line_error(
    tiny_gpt2, serve_on_localhost, tmp_path, capsys, monkeypatch
):
    served = tmp_path / "truncated"
    shutil.copytree(tiny_gpt2, served)
    weights = served / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:3000])  # the download was cut short
    model = serve_on_localhost(served)
    err = gen_ppl_error(model, tmp_path, capsys, monkeypatch)  # was a SafetensorError traceback
    assert f"scorer model {model}: its cached file " in err and err.endswith("(--scorer-model)")
    assert "model.safetensors is present but unreadable (Error while deserializing header" in err


def test_a_download_without_tokenizer_files_is_refused_not_scored(
    tiny_gpt2, serve_on_localhost, tmp_path, capsys, monkeypatch
):
    # transformers builds a GPT-2 tokenizer with an empty vocabulary for such a repository:
    # every word was no token, and only the sentence end was scored, exit status 0.
    # Refused when the model loads (was: at the first sentence of a sample, as "sample 0").
    served = tmp_path / "weights_only"
    shutil.copytree(tiny_gpt2, served, ignore=shutil.ignore_patterns("tokenizer*"))
    model = serve_on_localhost(served)
    err = gen_ppl_error(model, tmp_path, capsys, monkeypatch, "the cat sat [SEP] a dog ran")
    assert f"error: scorer model {model} gives a tokenizer with an empty vocabulary" in err
    assert "holds no tokenizer files" in err and err.endswith("(--scorer-model)")


def test_a_tokenizer_with_an_empty_vocabulary_is_refused_when_the_scorer_loads(tiny_gpt2, tmp_path):
    # One check, at load: before it, each sentence of each sample was checked for reading as
    # no tokens, and a sentence the scorer's own normalizer empties was blamed on its files.
    folder = tmp_path / "weights_only"
    shutil.copytree(tiny_gpt2, folder, ignore=shutil.ignore_patterns("tokenizer*"))
    assert transformers.AutoTokenizer.from_pretrained(str(folder)).vocab_size == 0
    with pytest.raises(InputValueError, match="gives a tokenizer with an empty vocabulary") as info:
        HFCausalLMScorer(str(folder), CPU)
    assert info.value.parameter == "scorer_model" and "\n" not in str(info.value)


@pytest.mark.parametrize("offline", [True, False])
def test_a_damaged_cached_model_is_named_not_blamed_on_the_id(
    tiny_gpt2, tmp_path, monkeypatch, offline
):
    # A config.json cut short in the Hugging Face cache was "cannot load a Hugging Face causal
    # LM ...; give a Hub id (the first use downloads it) or a local folder": the id was right,
    # its cached file is damaged, and fetching again keeps it until its folder is deleted.
    from tests.test_hub import write_hub_cache

    damaged = tmp_path / "damaged"
    shutil.copytree(tiny_gpt2, damaged)
    config = damaged / "config.json"
    config.write_bytes(config.read_bytes()[:40])
    cache = tmp_path / "hub-cache"
    write_hub_cache(cache, "test-org/damaged", {"main": damaged})
    write_hub_cache(cache, "test-org/intact", {"main": Path(tiny_gpt2)})
    hub_at(monkeypatch, "http://127.0.0.1:9", cache)  # nothing listens there
    if offline:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert HFCausalLMScorer("test-org/intact", CPU).context == CONTEXT  # the cache is read
    with pytest.raises(InputValueError) as info:
        HFCausalLMScorer("test-org/damaged", CPU)
    message, entry = str(info.value), cache / "models--test-org--damaged"
    assert message.startswith(f"scorer model test-org/damaged: its cached file {entry}")
    assert "config.json is present but unreadable (not JSON:" in message
    assert f"delete the folder {entry} and download it again with `" in message
    assert info.value.parameter == "scorer_model" and "\n" not in message


def test_a_scorer_model_from_an_unreachable_hub_says_what_to_do(
    unreachable_hub,  # noqa: F811
    tmp_path,
    capsys,
    monkeypatch,
):
    # Was transformers' own download: retries for most of a minute, then "We couldn't connect
    # to 'https://huggingface.co'..." Now the core's download (genodiff.hub.snapshot) says it.
    err = gen_ppl_error("test-org/absent", tmp_path, capsys, monkeypatch)
    assert err.startswith("genodiff gen-ppl: error: scorer model test-org/absent: no local")
    assert f"{unreachable_hub} is unreachable. Pre-download it where the network is" in err
    assert err.endswith("(--scorer-model)")
