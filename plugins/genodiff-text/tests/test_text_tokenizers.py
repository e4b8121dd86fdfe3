"""The text tokenizers: trained WordPiece / BPE and Hugging Face ones (built here, offline)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from genodiff_text.resources import CONFIGS
from genodiff_text.tokenizers import HFTokenizer, TrainedTokenizer, train_wordpiece
from omegaconf import OmegaConf
from tokenizers import Tokenizer as Backend
from tokenizers import decoders, models, normalizers, pre_tokenizers

from genodiff.config import load_config
from genodiff.errors import InputValueError
from genodiff.tokenizers import build_tokenizer, load_tokenizer, tokenizer_from_record
from genodiff.tokenizers.base import tokenizer_record

CORPUS = [
    "It is a truth universally acknowledged, that a single man must be in want of a wife.",
    "However little known the feelings or views of such a man may be.",
    "My dear Mr. Bennet, have you heard that Netherfield Park is let at last?",
    "Mr. Bennet replied that he had not.",
    "But it is, returned she; for Mrs. Long has just been here.",
    "Do you not want to know who has taken it?",
    "You want to tell me, and I have no objection to hearing it.",
] * 3


# ---------------------------------------------------------------------- WordPiece training


def test_train_wordpiece_merges_as_worked_out_by_hand():
    # low: l ##o ##w; lower: l ##o ##w ##e ##r; newest: n ##e ##w ##e ##s ##t; widest: ...
    counts = {"low": 5, "lower": 2, "newest": 6, "widest": 3}
    alphabet = ["##d", "##e", "##i", "##o", "##r", "##s", "##t", "##w", "l", "n", "w"]
    # Pair counts, highest first, ties to the smaller pair: (##e,##s)=9 then (##es,##t)=9,
    # (##o,##w)=7 [< (l,##o)], (l,##ow)=7, (##e,##w)=6, (##ew,##est)=6, (n,##ewest)=6,
    # (##d,##est)=3, (##i,##dest)=3, (w,##idest)=3, (##e,##r)=2, (low,##er)=2.
    merges = ["##es", "##est", "##ow", "low", "##ew", "##ewest", "newest", "##dest", "##idest",
              "widest", "##er", "lower"]  # fmt: skip
    vocab = train_wordpiece(counts, 100, 1, ["[PAD]"])
    assert list(vocab) == ["[PAD]", *alphabet, *merges]
    assert list(vocab.values()) == list(range(len(vocab)))
    # vocab_size stops the merges; min_frequency too (the 6-count pairs are below 7).
    assert list(train_wordpiece(counts, 16, 1, ["[PAD]"])) == ["[PAD]", *alphabet, *merges[:4]]
    assert list(train_wordpiece(counts, 100, 7, ["[PAD]"])) == ["[PAD]", *alphabet, *merges[:4]]


SIZES = {"wordpiece": 200, "bpe": 300}  # bpe: 256 bytes + 5 specials at least


def _trained(kind="wordpiece"):
    return TrainedTokenizer(kind=kind, vocab_size=SIZES[kind], lowercase=True).train(CORPUS)


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_trained_tokenizer_special_ids_and_mask_marker(kind):
    tok = _trained(kind)
    assert tok.name == "trained" and tok.domain == "text"
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.mask_id) == (0, 2, 3, 4)
    assert tok.backend.id_to_token(1) == "[UNK]"
    assert tok.vocab_size == tok.backend.get_vocab_size() <= SIZES[kind]
    assert set(tok.sample_ids) == set(range(tok.vocab_size)) - {0, 4}
    ids = tok.encode("a man [MASK] a wife")
    assert ids.count(4) == 1 and 2 not in ids and 3 not in ids  # no specials added
    template = tok.encode_template("the [MASK] [MASK] man")
    assert template[0] == 2 and template.count(4) == 2
    with pytest.raises(ValueError, match="no mask marker"):
        tok.encode_template("no marker here")
    text = tok.decode(tok.encode("mr. bennet replied that he had not."))
    assert text.replace(" ", "") == "mr.bennetrepliedthathehadnot."
    assert tok.decode([2, *tok.encode("the man"), 3, 0, 0], skip_special_tokens=True) == "the man"
    assert "[CLS]" in tok.decode([2, *tok.encode("the man")])


def test_trained_wordpiece_lowercases_and_has_no_unknown_for_seen_letters():
    tok = _trained("wordpiece")
    assert tok.encode("MR. BENNET") == tok.encode("mr. bennet")
    cased = TrainedTokenizer(kind="wordpiece", vocab_size=200, lowercase=False).train(CORPUS)
    assert cased.encode("Bennet") != cased.encode("bennet")
    assert 1 not in tok.encode("netherfield park")


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_trained_tokenizer_is_deterministic_in_process(kind):
    assert _trained(kind).backend.to_str() == _trained(kind).backend.to_str()


def test_trained_wordpiece_is_the_same_in_another_process(tmp_path):
    # Hash-map order changes between processes; the vocabulary must not.
    script = (
        "import json, sys\n"
        "from genodiff_text.tokenizers import TrainedTokenizer\n"
        "corpus = json.load(open(sys.argv[1]))\n"
        "tok = TrainedTokenizer(kind='wordpiece', vocab_size=200).train(corpus)\n"
        "print(json.dumps(json.loads(tok.backend.to_str())['model']['vocab']))\n"
    )
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps(CORPUS))
    env = {**os.environ, "PYTHONHASHSEED": "random"}
    run = subprocess.run(
        [sys.executable, "-c", script, str(corpus)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    here = json.loads(_trained("wordpiece").backend.to_str())["model"]["vocab"]
    assert json.loads(run.stdout) == here


def test_trained_tokenizer_state_round_trip_through_json(tmp_path):
    for kind in ("wordpiece", "bpe"):
        tok = _trained(kind)
        record = json.loads(json.dumps(tokenizer_record(tok)))  # as a checkpoint keeps it
        again = tokenizer_from_record(record)
        assert isinstance(again, TrainedTokenizer)
        for text in CORPUS[:7] + ["Unseen words: Pemberley, Darcy!"]:
            ids = tok.encode(text)
            assert again.encode(text) == ids
            assert again.decode(ids) == tok.decode(ids)
        assert (again.vocab_size, again.mask_id, again.pad_id, again.bos_id, again.eos_id) == (
            tok.vocab_size, tok.mask_id, tok.pad_id, tok.bos_id, tok.eos_id,
        )  # fmt: skip
        assert again.sample_ids == tok.sample_ids
        assert again.settings() == tok.settings()
        folder = tmp_path / kind
        tok.save(folder)
        assert load_tokenizer(folder).encode("the man") == tok.encode("the man")


def test_trained_tokenizer_from_config_uses_the_corpus_and_validates():
    calls = []

    def corpus():
        calls.append(1)
        return iter(CORPUS)

    tok = build_tokenizer({"name": "trained", "kind": "bpe", "vocab_size": 300}, corpus=corpus)
    assert isinstance(tok, TrainedTokenizer) and calls == [1] and tok.kind == "bpe"
    with pytest.raises(ValueError, match="no corpus"):
        TrainedTokenizer.from_config({"kind": "wordpiece"}, None)
    with pytest.raises(ValueError, match="kind must be one of wordpiece, bpe, got 'unigram'"):
        TrainedTokenizer(kind="unigram")
    with pytest.raises(ValueError, match="too small"):
        TrainedTokenizer(kind="bpe", vocab_size=100)
    with pytest.raises(ValueError, match="no text"):
        TrainedTokenizer().train([])
    with pytest.raises(AttributeError, match="before it is trained"):
        _ = TrainedTokenizer().mask_id


# ---------------------------------------------------------------------- Hugging Face tokenizers

WORDS = ["the", "man", "sat", "a", "wife", "single", "##s", "##ed", ".", ","]


def _bert_like(folder):
    """A tiny BertTokenizerFast saved as a local folder: [MASK] = 5, 16 ids."""
    from transformers import BertTokenizerFast

    vocab = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    backend = Backend(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece()
    hf = BertTokenizerFast(
        tokenizer_object=backend,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
    )
    hf.save_pretrained(folder)
    return len(vocab)


def _gpt2_like(folder):
    """A tiny byte-level BPE GPT2TokenizerFast: <|endoftext|> is BOS = EOS, no pad, no mask."""
    from tokenizers import trainers
    from transformers import GPT2TokenizerFast

    backend = Backend(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(CORPUS, trainer=trainer)
    hf = GPT2TokenizerFast(
        tokenizer_object=backend,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    hf.save_pretrained(folder)
    return backend.get_vocab_size(), backend.token_to_id("<|endoftext|>")


def test_hf_bert_like_keeps_its_own_mask(tmp_path):
    pytest.importorskip("transformers")
    size = _bert_like(tmp_path / "bert")
    tok = HFTokenizer(pretrained=str(tmp_path / "bert"))
    assert (tok.vocab_size, tok.mask_id, tok.pad_id, tok.bos_id, tok.eos_id) == (size, 5, 0, 3, 4)
    assert not tok.appended_mask
    assert set(tok.sample_ids) == set(range(size)) - {0, 5}
    assert tok.encode("The man sat.") == [6, 7, 8, 14]
    assert tok.encode_template("the [MASK] sat") == [3, 6, 5, 8]
    assert tok.decode([3, 6, 7, 8, 14, 4, 0], skip_special_tokens=True) == "the man sat."


def test_hf_gpt2_like_appends_the_mask_and_pads_with_it(tmp_path):
    pytest.importorskip("transformers")
    size, eot = _gpt2_like(tmp_path / "gpt2")
    tok = HFTokenizer(pretrained=str(tmp_path / "gpt2"))
    assert tok.appended_mask
    assert tok.mask_id == size and tok.vocab_size == size + 1  # MDLM: 50,257 of 50,258
    assert tok.pad_id == tok.mask_id  # MDLM: [PAD] and the mask share the appended id
    assert tok.bos_id == tok.eos_id == eot
    assert set(tok.sample_ids) == set(range(size))
    the, sat = tok.encode("the"), tok.encode(" sat")
    assert tok.encode_template("the [MASK] sat") == [eot, *the, size, *sat]
    assert tok.decode([*the, size, *sat]) == "the [MASK] sat"
    assert tok.decode([size, *the]) == "[MASK] the"
    assert tok.decode([*the, size, *sat], skip_special_tokens=True) == "the sat"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([size + 1])


def test_hf_state_round_trip_without_the_original_files(tmp_path):
    pytest.importorskip("transformers")
    texts = ["The man sat.", "a single wife, the man."]
    for maker in (_bert_like, _gpt2_like):
        folder = tmp_path / maker.__name__
        maker(folder)
        tok = HFTokenizer(pretrained=str(folder))
        expected = [(tok.encode(t), tok.decode(tok.encode(t))) for t in texts]
        record = json.loads(json.dumps(tokenizer_record(tok)))
        shutil.rmtree(folder)  # the checkpoint must not need them
        again = tokenizer_from_record(record)
        assert [(again.encode(t), again.decode(again.encode(t))) for t in texts] == expected
        assert (again.vocab_size, again.mask_id, again.pad_id, again.bos_id, again.eos_id) == (
            tok.vocab_size, tok.mask_id, tok.pad_id, tok.bos_id, tok.eos_id,
        )  # fmt: skip
        assert again.decode([tok.mask_id]) == tok.decode([tok.mask_id])


def test_hf_unavailable_name_says_how_to_get_it(monkeypatch):
    pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError) as info:
        HFTokenizer(pretrained="genodiff-tests/no-such-tokenizer")
    message = str(info.value)
    assert "it is not in the cache" in message and "downloads are off (HF_HUB_OFFLINE=1)" in message
    assert "AutoTokenizer.from_pretrained" in message and "name: trained" in message


def test_the_trained_tokenizer_remedy_of_an_unavailable_name_works_as_typed(monkeypatch):
    # The remedy was `tokenizer={name: trained, kind: wordpiece, vocab_size: 8192}`: split by
    # the shell at its spaces, and quoted, refused by Hydra ("Could not override 'tokenizer'":
    # it merges the value into the section, which takes no kind nor vocab_size).
    pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError) as info:
        HFTokenizer(pretrained="genodiff-tests/no-such-tokenizer")
    remedy = shlex.split(str(info.value).split("train a tokenizer on the data instead: ", 1)[1])
    config = load_config(CONFIGS / "lm1b.yaml", remedy)  # lm1b: tokenizer {hf, bert}
    assert OmegaConf.to_container(config.tokenizer) == {
        "name": "trained",
        "kind": "wordpiece",
        "vocab_size": 8192,
    }


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_data_sentences_read_special_token_names_as_text(kind):
    # What the data module tokenizes (encode_batch): a special token's name in a sentence is
    # text, tokenized as the same characters written with spaces around its brackets would be
    # (both pre-tokenizers split "[" and "]" off). A prompt (encode) still reads [MASK].
    tok = _trained(kind)
    sentence = "a man [MASK] the [PAD] wife [SEP] [CLS]"
    (ids,) = tok.encode_batch([sentence])
    specials = {tok.mask_id, tok.pad_id, tok.bos_id, tok.eos_id}
    assert not specials & set(ids)
    if kind == "wordpiece":  # BERT's pre-tokenizer splits punctuation off: the same words
        spaced = "a man [ mask ] the [ pad ] wife [ sep ] [ cls ]"
        assert ids == tok.encode(spaced)
    assert tok.encode("a man [MASK]").count(tok.mask_id) == 1
    assert tok.encode(sentence).count(tok.mask_id) == 1  # after encode_batch too


def test_hf_folder_without_usable_tokenizer_files_is_a_user_error(tmp_path):
    transformers = pytest.importorskip("transformers")
    empty = tmp_path / "empty"
    empty.mkdir()
    malformed = tmp_path / "malformed"
    _bert_like(malformed)
    (malformed / "tokenizer.json").write_text("{not json")
    for folder in (empty, malformed):  # used to raise transformers' own traceback
        with pytest.raises(InputValueError, match="cannot read a Hugging Face tokenizer") as info:
            HFTokenizer(pretrained=str(folder))
        assert "\n" not in str(info.value) and "tokenizer.json" in str(info.value)
    # A model folder without tokenizer files (config.json only): transformers builds a tokenizer
    # with an empty vocabulary, which used to read every text as no tokens at all.
    weights_only = tmp_path / "weights_only"
    transformers.GPT2Config(vocab_size=16, n_positions=8).save_pretrained(weights_only)
    assert transformers.AutoTokenizer.from_pretrained(str(weights_only)).encode("the man") == []
    with pytest.raises(InputValueError, match="empty vocabulary"):
        HFTokenizer(pretrained=str(weights_only))


def test_hf_without_transformers_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import fails
    with pytest.raises(ImportError, match=r"genodiff-text\[hub\]"):
        HFTokenizer(pretrained="bert-base-uncased")


# ---------------------------------------------------------------------- samples


def test_sample_ends_at_its_first_pad_and_keeps_sentence_boundaries():
    tok = TrainedTokenizer(vocab_size=300).train(CORPUS)
    cls, sep, pad = tok.bos_id, tok.eos_id, tok.pad_id
    mr, bennet, replied = tok.encode("mr"), tok.encode("bennet"), tok.encode("replied")
    # a padded sentence, as a model that predicts [PAD] (objective.padding) ends it
    ended = [cls, *mr, *bennet, sep, pad, pad, *replied]  # nothing after the first [PAD]
    assert tok.decode_sample(ended) == "mr bennet"
    # two sentences in one sample, laid out as a wrap: true block lays them out (one [SEP]
    # between them, no [CLS]): the ids survive a round trip (was: a [CLS] added after the
    # [SEP], a token at a place no wrapped window has it, scored by gen-ppl's AR scorer)
    two = [cls, *mr, sep, *bennet, *replied]
    assert tok.decode_sample(two) == "mr [SEP] bennet replied"
    assert tok.encode_sample("mr [SEP] bennet replied") == two
    assert tok.encode_sample(tok.decode_sample(ended)) == [cls, *mr, *bennet]


def test_gpt2_like_sample_boundary_is_one_end_of_text(tmp_path):
    pytest.importorskip("transformers")
    size, eot = _gpt2_like(tmp_path / "gpt2")
    tok = HFTokenizer(pretrained=str(tmp_path / "gpt2"))
    the, sat = tok.encode("the"), tok.encode("sat")
    sample = [eot, *the, eot, *sat, tok.pad_id]
    assert tok.decode_sample(sample) == "the <|endoftext|> sat"
    assert tok.encode_sample("the <|endoftext|> sat") == [eot, *the, eot, *sat]


def test_a_drawn_unknown_word_is_written_and_read_back_not_dropped(tmp_path):
    # [UNK] stands for a word the vocabulary lacks: content the model drew, written as the
    # unknown token (as upstream MDLM's batch_decode keeps it). It used to be dropped with the
    # control tokens ("the [UNK] man" read "the man"), so sample files and gen-ppl's AR scorer
    # (encode_sample) saw a sample the model never drew.
    pytest.importorskip("transformers")
    _bert_like(tmp_path / "bert")
    for tok in (_trained("wordpiece"), HFTokenizer(pretrained=str(tmp_path / "bert"))):
        the, man, sat = tok.encode("the"), tok.encode("man"), tok.encode("sat")
        cls, sep, unk, pad = tok.bos_id, tok.eos_id, tok.unk_id, tok.pad_id
        drawn = [cls, *the, unk, *man, sep, unk, *sat, pad, pad]
        text = tok.decode_sample(drawn)
        assert text == "the [UNK] man [SEP] [UNK] sat"
        assert tok.encode_sample(text) == drawn[:-2]  # the ids the model drew, [PAD]s aside
        # the control tokens are still left out: a [CLS] or [MASK] drawn inside a sentence
        assert tok.decode_sample([cls, *the, cls, tok.mask_id, *man]) == "the man"


def test_byte_level_samples_have_no_unknown_token_to_keep():
    tok = _trained("bpe")  # no unknown token: its [UNK] (id 1) is a control token like [CLS]
    assert tok.unk_id is None
    the, man = tok.encode("the"), tok.encode(" man")
    assert tok.decode_sample([tok.bos_id, *the, 1, *man]) == "the man"
    assert tok.decode_sample([tok.bos_id, *the, *man]) == "the man"


# ---------------------------------------------------------------------- words a user fixes


def test_unknown_prefix_words_are_named_not_dropped():
    tok = _trained("wordpiece")  # its alphabet has no z, x, q
    assert tok.decode([tok.unk_id]) == "[UNK]"
    with pytest.raises(ValueError, match="does not know 'zxqvbnm', 'qwxyz'"):
        tok.encode_prefix("zxqvbnm qwxyz")
    with pytest.raises(ValueError, match="does not know 'zxqvbnm'"):
        tok.encode_prefix("the man zxqvbnm")
    with pytest.raises(ValueError, match="does not know 'zxqvbnm'"):
        tok.encode_template("the [MASK] zxqvbnm")
    assert tok.encode_prefix("the man") == [tok.bos_id, *tok.encode("the man")]
    assert tok.encode_prefix("the [UNK] man").count(tok.unk_id) == 1  # written as such: kept


def test_unknown_words_of_a_hugging_face_vocabulary_are_named(tmp_path):
    pytest.importorskip("transformers")
    _bert_like(tmp_path / "bert")
    tok = HFTokenizer(pretrained=str(tmp_path / "bert"))
    with pytest.raises(ValueError, match="does not know 'Zebra'"):
        tok.encode_prefix("The Zebra sat.")
    size, _ = _gpt2_like(tmp_path / "gpt2")
    byte_level = HFTokenizer(pretrained=str(tmp_path / "gpt2"))
    assert byte_level.unk_id is None  # every text has bytes: nothing is unknown
    ids = byte_level.encode_template("zxqvbnm [MASK] sat")
    assert byte_level.decode(ids[1:]) == "zxqvbnm [MASK] sat"


def hub_at(monkeypatch: pytest.MonkeyPatch, endpoint: str, cache: Path) -> None:
    """huggingface_hub pointed at ``endpoint``, online, with ``cache`` as its cache (the
    constants it read at import and the environment both)."""
    import huggingface_hub.constants as hub_constants

    monkeypatch.setattr(hub_constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))


@pytest.fixture
def unreachable_hub(tmp_path, monkeypatch) -> str:
    """A Hub endpoint where nothing listens (127.0.0.1, the discard port), an empty cache."""
    endpoint = "http://127.0.0.1:9"
    hub_at(monkeypatch, endpoint, tmp_path / "hub-cache")
    return endpoint


def test_hf_tokenizer_from_an_unreachable_hub_says_what_to_do(unreachable_hub):
    # Was transformers' own download: retries for most of a minute, then "We couldn't connect
    # to ..." without a way out. Now the core's download (genodiff.hub.snapshot) says it.
    pytest.importorskip("transformers")
    with pytest.raises(FileNotFoundError) as info:
        HFTokenizer(pretrained="genodiff-tests/no-such-tokenizer")
    message = str(info.value)
    assert f"{unreachable_hub} is unreachable. Pre-download it where the network is" in message
    assert "download genodiff-tests/no-such-tokenizer" in message


@pytest.mark.parametrize("offline", [True, False])
def test_a_damaged_cached_tokenizer_is_named_not_called_missing(tmp_path, monkeypatch, offline):
    # A tokenizer.json cut short in the Hugging Face cache was reported as "not in the local
    # cache" (offline) or "not in the local cache and the hub did not give it": the file is
    # there, unreadable, and fetching again does not replace it until its folder is deleted.
    pytest.importorskip("transformers")
    from tests.test_hub import commit_of, write_hub_cache

    files = tmp_path / "files"
    _bert_like(files)
    (files / "tokenizer.json").write_text('{"version": "1.0", "trunc')  # a write cut short
    cache = tmp_path / "hub-cache"
    write_hub_cache(cache, "test-org/damaged", {"main": files})
    hub_at(monkeypatch, "http://127.0.0.1:9", cache)  # nothing listens there
    if offline:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputValueError) as info:
        HFTokenizer(pretrained="test-org/damaged")
    message = str(info.value)
    entry = cache / "models--test-org--damaged"
    assert f"its cached file {entry / 'snapshots'}" in message
    assert "tokenizer.json is present but unreadable (not JSON:" in message
    assert f"delete the folder {entry} and download it again with `" in message
    commit = commit_of("test-org/damaged", "main")  # the snapshot's: the same files again
    assert f"download test-org/damaged --revision {commit}` (into the same HF_HUB_CACHE)" in message
    assert "not in the" not in message and "\n" not in message
