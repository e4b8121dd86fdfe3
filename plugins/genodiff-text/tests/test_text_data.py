"""TextDataModule, the LM1B detokenizer and readers, with a word-level tokenizer built here."""

from __future__ import annotations

import gzip
import sys
import types
from collections.abc import Sequence

import pytest
import torch
from genodiff_text.data import lm1b
from genodiff_text.data.datamodule import TextDataModule
from genodiff_text.data.lm1b import lm1b_detokenizer
from genodiff_text.resources import CORPUS
from genodiff_text.tokenizers import TrainedTokenizer

from genodiff.errors import InputValueError
from genodiff.tokenizers import DNATokenizer
from genodiff.tokenizers.base import Tokenizer

PAD, UNK, CLS, SEP, MASK = range(5)


class WordTokenizer(Tokenizer):
    """Words split on spaces: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4, then ``words``."""

    name = "words"
    domain = "text"

    def __init__(self, words: Sequence[str] = ("a", "b", "c", "d", "e", "f")) -> None:
        self.tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
        self.index = {t: i for i, t in enumerate(self.tokens)}
        self.vocab_size = len(self.tokens)
        self.pad_id, self.bos_id, self.eos_id, self.mask_id = PAD, CLS, SEP, MASK
        self.sample_ids = tuple(i for i in range(self.vocab_size) if i not in (PAD, MASK))

    def encode(self, text: str) -> list[int]:
        return [self.index.get(w, UNK) for w in text.split()]

    def decode(self, ids, skip_special_tokens=False) -> str:
        return " ".join(self.tokens[i] for i in ids if not (skip_special_tokens and i < 5))


A, B, C, D, E, F = range(5, 11)


def _module(path, **kwargs) -> TextDataModule:
    dm = TextDataModule(path=str(path), **kwargs)
    dm.attach_tokenizer(WordTokenizer())
    return dm


def _ids(dataset) -> list[list[int]]:
    return [dataset[i]["input_ids"].tolist() for i in range(len(dataset))]


def _names(dataset) -> list[str]:
    return [dataset.item_name(i) for i in range(len(dataset))]


# ---------------------------------------------------------------------- detokenizer


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('He said " hello there " to me .', 'He said "hello there" to me.'),
        ("Prices ( in dollars ) fell ; analysts were surprised !",
         "Prices (in dollars) fell; analysts were surprised!"),
        ("Is it $ 5 or £ 3 ?", "Is it $5 or £3?"),
        ("See http : / / example.com / news", "See http://example.com/news"),
        # " n't" stays split: MDLM's lm1b_detokenizer only joins a clitic that starts with '.
        ("I do n't think so , Mr. Smith 's dog said .", "I do n't think so, Mr. Smith's dog said."),
        ("Rates rose 5 % .", "Rates rose 5 % ."),  # " ." joins only after a word
        # Rules apply in order: " ." is joined before the quotes are.
        ("The [ sic ] note : read it ' now ' .", "The [sic] note: read it 'now' ."),
    ],
)  # fmt: skip
def test_lm1b_detokenizer_hand_cases(raw, expected):
    assert lm1b_detokenizer(raw) == expected


# ---------------------------------------------------------------------- windows


@pytest.fixture
def tiny_file(tmp_path):
    path = tmp_path / "tiny.txt"
    path.write_text("a b c\n\n  d e  \na a a a a a\n", encoding="utf-8")
    return path


def test_wrap_false_items_are_cls_sentence_sep_padded_or_truncated(tiny_file):
    # eval --file never truncates silently: it counts the lines and tokens cut
    # the window that holds every line named as Python and the command line spell it
    cut = r"1 of 3 lines are longer than the 6-token window .*\(2 of their tokens .*length=8 "
    cut += r"\(genodiff eval --length 8\) scores every line whole$"
    with pytest.warns(UserWarning, match=cut):
        dataset = _module(tiny_file, max_length=6).file_dataset(tiny_file)
    assert _ids(dataset) == [
        [CLS, A, B, C, SEP, PAD],
        [CLS, D, E, SEP, PAD, PAD],
        [CLS, A, A, A, A, SEP],  # six a's truncated to four: [SEP] stays last
    ]
    assert _names(dataset) == ["line 1", "line 3", "line 4"]  # blank line 2 skipped
    assert dataset.max_length == 6
    assert dataset[0]["input_ids"].dtype == torch.long


def test_a_file_whose_lines_fit_is_read_without_a_warning(tiny_file, recwarn):
    _module(tiny_file, max_length=8).file_dataset(tiny_file)
    assert not [w for w in recwarn if "longer than" in str(w.message)]


def test_wrap_true_blocks_follow_mdlm_group_texts(tiny_file):
    # stream: a b c [SEP] d e [SEP] a a a a a a [SEP] (14), chunks of 6 - 2 = 4, rest dropped
    dataset = _module(tiny_file, max_length=6, wrap=True).file_dataset(tiny_file)
    assert _ids(dataset) == [
        [CLS, A, B, C, SEP, SEP],
        [CLS, D, E, SEP, A, SEP],
        [CLS, A, A, A, A, SEP],
    ]
    assert _names(dataset) == ["block 0 (line 1)", "block 1 (lines 3-4)", "block 2 (line 4)"]
    with pytest.raises(IndexError):
        dataset[3]


def test_texts_scored_in_memory_are_one_item_each_wrapped_or_not(tiny_file):
    """Model.score: one item per text. Wrapped, each text whole as [CLS] text [SEP] (was: the
    texts joined into one stream cut into blocks: items mixing texts, none at all for short
    ones, so Model.score returned [] or misaligned scores); padded, the window file_dataset
    reads for that line."""
    texts = ["a b c", "d e", "a a a a a a"]
    wrapped = _module(tiny_file, max_length=6, wrap=True).sequences_dataset(texts)
    assert _ids(wrapped) == [[CLS, A, B, C, SEP], [CLS, D, E, SEP], [CLS, *[A] * 6, SEP]]
    assert _names(wrapped) == ["line 1", "line 2", "line 3"]
    # the third text is cut to the window, as eval --file cuts a line: never silently (was: no
    # warning from Model.score)
    with pytest.warns(UserWarning, match=r"1 of 3 texts are longer than the 6-token window"):
        padded = _module(tiny_file, max_length=6).sequences_dataset(texts)
    with pytest.warns(UserWarning, match="1 of 3 lines are longer"):
        assert _ids(padded) == _ids(_module(tiny_file, max_length=6).file_dataset(tiny_file))


@pytest.mark.parametrize("wrap", [False, True])
def test_a_text_scored_in_memory_is_read_as_a_line_of_a_file(tmp_path, wrap):
    """Surrounding whitespace (a line read with its newline) is dropped as read_lines drops it:
    a byte-level BPE would otherwise score it as tokens of its own."""
    tokenizer = TrainedTokenizer(kind="bpe", vocab_size=300).train(["she was here"] * 20)
    path = tmp_path / "line.txt"
    path.write_text("  she was here \n", encoding="utf-8")
    module = TextDataModule(path=str(path), max_length=8, wrap=wrap)
    module.attach_tokenizer(tokenizer)
    expected = [tokenizer.bos_id, *tokenizer.encode("she was here"), tokenizer.eos_id]
    scored = _ids(module.sequences_dataset(["  she was here \n"]))
    assert [row[: len(expected)] for row in scored] == [expected]
    if not wrap:
        assert scored == _ids(module.file_dataset(path))


@pytest.mark.parametrize("wrap", [False, True])
def test_a_text_of_no_token_is_refused_by_index_not_scored(tmp_path, wrap):
    """Model.score of '' (or of text the tokenizer reads as nothing) used to score the window
    [CLS] [SEP] (padded): a number for a sentence no one gave, which a file's blank line never
    gets (file_dataset skips it)."""
    tokenizer = TrainedTokenizer(vocab_size=60).train(["she was here"] * 20)
    path = tmp_path / "line.txt"
    path.write_text("she was here\n", encoding="utf-8")
    module = TextDataModule(path=str(path), max_length=8, wrap=wrap)
    module.attach_tokenizer(tokenizer)
    assert tokenizer.encode_batch(["\x07"]) == [[]]  # BERT's normalizer drops control chars
    for texts, index, what in (
        (["she was here", ""], 1, "is empty"),
        (["she was here", "she", " \n "], 2, "is empty"),
        (["\x07", "she was here"], 0, "reads as no token"),
    ):
        with pytest.raises(InputValueError, match=f"^sequence {index} {what} ") as caught:
            module.sequences_dataset(texts)
        assert "drop it or give it words" in str(caught.value) and "\n" not in str(caught.value)
        assert caught.value.parameter == "sequences"
    assert len(module.sequences_dataset(["she was here", "she"])) == 2


def test_a_wrapped_block_survives_the_round_trip_of_its_sample_text(tmp_path):
    """decode_sample writes a wrapped block's sentence ends as `` [SEP] ``; encode_sample (what
    gen-ppl's AR scorer reads) restores the block's ids: one [SEP] between sentences, as the
    stream holds them (was: [SEP] [CLS], a [CLS] no wrapped window has there)."""
    path = tmp_path / "three.txt"
    path.write_text("mr bennet replied\nshe was here\nhe was not\n", encoding="utf-8")
    tokenizer = TrainedTokenizer(vocab_size=300).train(path.read_text().splitlines() * 5)
    module = TextDataModule(path=str(path), max_length=12, wrap=True)
    module.attach_tokenizer(tokenizer)
    block = module.file_dataset(path)[0]["input_ids"].tolist()  # [CLS] ... [SEP]
    text = tokenizer.decode_sample(block)
    assert text.count(" [SEP] ") == 2  # two sentence ends inside the block
    while block[-1] == tokenizer.eos_id:  # a closing [SEP] ends the text: nothing written
        block.pop()
    assert tokenizer.encode_sample(text) == block


def test_a_generated_sentence_ends_at_its_first_sep(tiny_file):
    """wrap: false windows hold one sentence, so a sample ends where a sentence does: at its
    first [SEP] (or [PAD]), everything after it [PAD]; wrapped blocks run on unchanged."""
    drawn = torch.tensor(
        [
            [CLS, A, SEP, B, C, SEP],  # a [SEP] in mid-sample, more words after it
            [CLS, A, B, PAD, C, D],  # the model ended it with [PAD]
            [CLS, A, B, C, D, E],  # no end: the whole window
        ]
    )
    ended = _module(tiny_file, max_length=6).end_samples(drawn)
    assert ended.tolist() == [
        [CLS, A, SEP, PAD, PAD, PAD],
        [CLS, A, B, PAD, PAD, PAD],
        [CLS, A, B, C, D, E],
    ]
    assert WordTokenizer().decode(ended[0].tolist(), skip_special_tokens=True) == "a"
    assert torch.equal(_module(tiny_file, max_length=6, wrap=True).end_samples(drawn), drawn)
    gpt2_like = WordTokenizer()  # one end-of-text token opens and closes a sentence
    gpt2_like.bos_id = SEP
    module = TextDataModule(path=str(tiny_file), max_length=4)
    module.attach_tokenizer(gpt2_like)
    assert module.end_samples(torch.tensor([[SEP, A, SEP, B]])).tolist() == [[SEP, A, SEP, PAD]]


def test_an_infilled_sample_keeps_every_given_token(tiny_file):
    """A template [CLS] a _ _ b _ (positions 0, 1 and 4 given): a sample runs at least to its
    last given token; a [PAD] drawn before it is the sentence end it stands for ([SEP]), a
    [SEP] drawn there stays one (was: the sample ended there and b, the user's, was lost)."""
    module = _module(tiny_file, max_length=6)
    given = torch.tensor([True, True, False, False, True, False])
    drawn = torch.tensor(
        [
            [CLS, A, PAD, C, B, SEP],  # [PAD] drawn inside the template
            [CLS, A, SEP, C, B, D],  # [SEP] drawn inside, no end after b
            [CLS, A, C, D, B, PAD],  # the model ended it after b
        ]
    )
    assert module.end_samples(drawn, given).tolist() == [
        [CLS, A, SEP, C, B, SEP],
        [CLS, A, SEP, C, B, D],
        [CLS, A, C, D, B, PAD],
    ]
    text = WordTokenizer().decode(module.end_samples(drawn, given)[0].tolist(), True)
    assert text == "a c b"  # every given word written
    # without a template (a free sample) a sentence ends at its first [PAD] or [SEP]
    assert module.end_samples(drawn)[:2].tolist() == [
        [CLS, A] + [PAD] * 4,
        [CLS, A, SEP] + [PAD] * 3,
    ]


def test_unknown_words_and_the_detokenize_flag(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("a , b zzz\n")
    plain = _module(path, max_length=8).file_dataset(path)
    assert _ids(plain)[0][:6] == [CLS, A, UNK, B, UNK, SEP]  # "," and "zzz" unknown
    detok = _module(path, max_length=8, detokenize=True).file_dataset(path)
    assert _ids(detok)[0][:5] == [CLS, UNK, B, UNK, SEP]  # "a," "b" "zzz"


# ---------------------------------------------------------------------- splits


def _numbered(tmp_path, count=10, blank_every=3, gz=False):
    lines = []
    for i in range(count):
        if i % blank_every == 0:
            lines.append("   ")
        lines.append(" ".join("abcdef"[j % 6] for j in range(i + 1)))
    text = "\n".join(lines) + "\n"
    path = tmp_path / ("s.txt.gz" if gz else "s.txt")
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    file_lines = [n for n, line in enumerate(lines, start=1) if line.strip()]
    return path, [line for line in lines if line.strip()], file_lines


@pytest.mark.parametrize("gz", [False, True])
def test_split_by_line_order(tmp_path, gz):
    path, sentences, numbers = _numbered(tmp_path, gz=gz)
    dm = _module(path, max_length=16, split_fractions=[0.6, 0.2, 0.2])
    dm.check_files()
    assert list(dm.training_texts()) == sentences[:6]
    dm.setup()
    for split, (lo, hi) in {"train": (0, 6), "valid": (6, 8), "test": (8, 10)}.items():
        assert _names(dm.datasets[split]) == [f"line {n}" for n in numbers[lo:hi]]
    # sentence k has k + 1 words: a b c d e f a ...
    assert _ids(dm.heldout_dataset("test"))[0][:11] == [CLS, A, B, C, D, E, F, A, B, C, SEP]
    assert dm.heldout_dataset("valid") is dm.datasets["valid"]


def test_max_lines_caps_before_splitting(tmp_path):
    path, sentences, numbers = _numbered(tmp_path)
    dm = _module(path, max_length=16, split_fractions=[0.6, 0.2, 0.2], max_lines=5)
    dm.setup()
    assert [len(dm.datasets[s]) for s in ("train", "valid", "test")] == [3, 1, 1]
    assert _names(dm.datasets["test"]) == [f"line {numbers[4]}"]


def test_loaders_shuffle_reproducibly_per_epoch(tmp_path):
    path, _, _ = _numbered(tmp_path, count=40)
    dm = _module(path, max_length=8, batch_size=4, seed=3)
    dm.setup("fit")
    loader = dm.train_dataloader()
    batch = next(iter(loader))["input_ids"]
    assert batch.shape == (4, 8)

    def order(epoch):
        loader.sampler.set_epoch(epoch)
        return list(loader.sampler)

    assert order(0) == order(0) and order(0) != order(1)
    assert sorted(order(1)) == list(range(32))
    assert next(iter(dm.val_dataloader()))["input_ids"].shape == (4, 8)  # 4 valid sentences


# ---------------------------------------------------------------------- bad input


def test_missing_file(tmp_path):
    dm = TextDataModule(path=str(tmp_path / "nope.txt"))
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        dm.check_files()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"hello\nwor\x00ld\n", r"NUL byte at byte offset 9 .*line 2"),
        (b"hello\n\xffabc\n", r"not valid UTF-8: byte ff at byte offset 6 .*line 2"),
        (b"caf\xc3\n", r"not valid UTF-8: byte c3 at byte offset 3"),
        (b"", "is empty"),
        (b"  \n\n\t\n", "only blank lines"),
        (b"one sentence\nand another\n", r"too few .*the valid split"),
    ],
)
def test_bad_files_say_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        TextDataModule(path=str(path)).check_files()


def test_bad_gzip_and_bad_eval_file(tmp_path):
    path = tmp_path / "bad.gz"
    path.write_bytes(b"\x1f\x8b" + b"not really gzip")
    with pytest.raises(ValueError, match="cannot be decompressed"):
        TextDataModule(path=str(path)).check_files()
    good, _, _ = _numbered(tmp_path)
    dm = _module(good)
    binary = tmp_path / "b.bin"
    binary.write_bytes(b"\x00\x01\x02")
    with pytest.raises(ValueError, match="NUL byte at byte offset 0"):
        dm.file_dataset(binary)
    with pytest.raises(FileNotFoundError):
        dm.file_dataset(tmp_path / "missing.txt")


def test_bad_settings_and_tokenizer_domain(tmp_path):
    # The sources as words (was: a Python tuple, "one of ('file', 'lm1b', ...)").
    with pytest.raises(ValueError, match="source must be one of file, lm1b, lm1b_release, got"):
        TextDataModule(source="wikipedia")
    with pytest.raises(ValueError, match="max_length must be >= 3"):
        TextDataModule(max_length=2)
    with pytest.raises(ValueError, match="summing to 1"):
        TextDataModule(split_fractions=[0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="needs data.root"):
        TextDataModule(source="lm1b_release")
    with pytest.raises(ValueError, match="reads text but the tokenizer 'dna'"):
        TextDataModule().attach_tokenizer(DNATokenizer())
    path, _, _ = _numbered(tmp_path)
    with pytest.raises(ValueError, match="attach a tokenizer"):
        TextDataModule(path=str(path)).setup()


def test_wrap_true_split_without_a_full_block(tmp_path):
    path, _, _ = _numbered(tmp_path)
    dm = _module(path, max_length=64, wrap=True, split_fractions=[0.6, 0.2, 0.2])
    dm.setup("fit")
    with pytest.raises(ValueError, match="valid split has no 64-token window"):
        dm.val_dataloader()


def test_bundled_corpus_is_valid_text():
    dm = TextDataModule()
    assert dm.path == CORPUS and dm.path.is_file()
    dm.check_files()
    assert dm._line_count > 10_000


# ---------------------------------------------------------------------- LM1B sources


def _release(tmp_path):
    root = tmp_path / lm1b.RELEASE_NAME
    train, held = root / lm1b.TRAIN_DIR, root / lm1b.HELDOUT_DIR
    train.mkdir(parents=True)
    held.mkdir()
    (train / "news.en-00002-of-00100").write_text("c d .\n")
    (train / "news.en-00001-of-00100").write_text("a b , c .\nb 's\n")
    (held / "news.en.heldout-00000-of-00050").write_text("e f !\n")
    (held / "news.en.heldout-00001-of-00050").write_text('d " e " .\n')
    (root / "README").write_text("not a shard\n")
    return root


def test_lm1b_release_layout_splits_and_detokenizes(tmp_path):
    root = _release(tmp_path)
    dm = TextDataModule(source="lm1b_release", root=str(root), max_length=8)
    dm.check_files()
    assert list(dm.training_texts()) == ["a b, c.", "b's", "c d."]  # shards in order
    dm.attach_tokenizer(WordTokenizer())
    dm.setup()
    assert _names(dm.datasets["train"]) == [
        "news.en-00001-of-00100 line 1",
        "news.en-00001-of-00100 line 2",
        "news.en-00002-of-00100 line 1",
    ]
    test = dm.heldout_dataset("test")
    assert _names(test) == [
        "news.en.heldout-00000-of-00050 line 1",
        "news.en.heldout-00001-of-00050 line 1",
    ]
    assert _ids(test)[1][:5] == [CLS, D, UNK, UNK, SEP]  # 'd "e" .' after detokenizing
    assert _ids(dm.datasets["valid"]) == _ids(test)  # valid = test, as MDLM
    # The run record hashes the files read: every training shard, then every held-out shard.
    files = [p.name for p in dm.data_files()]
    assert files == [
        "news.en-00001-of-00100",
        "news.en-00002-of-00100",
        "news.en.heldout-00000-of-00050",
        "news.en.heldout-00001-of-00050",
    ]
    capped = TextDataModule(source="lm1b_release", root=str(root), max_lines=2)
    assert len(list(capped.training_texts())) == 2
    # wrap: a b, c. [SEP] b's [SEP] | c d. [SEP]: blocks of 4 cross shards; [SEP] left over
    wrapped = TextDataModule(source="lm1b_release", root=str(root), max_length=6, wrap=True)
    wrapped.attach_tokenizer(WordTokenizer())
    wrapped.setup("fit")
    blocks = wrapped.datasets["train"]
    assert _ids(blocks) == [[CLS, A, UNK, UNK, SEP, SEP], [CLS, UNK, SEP, C, UNK, SEP]]
    assert _names(blocks) == [
        "block 0 (news.en-00001-of-00100 line 1)",
        "block 1 (news.en-00001-of-00100 line 2 - news.en-00002-of-00100 line 1)",
    ]


def test_lm1b_release_missing_shards_say_where_to_get_them(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"lm-benchmark.*set data.root"):
        TextDataModule(source="lm1b_release", root=str(tmp_path)).check_files()


class _FakeHFDataset:
    def __init__(self, texts):
        self.texts = list(texts)

    def __len__(self):
        return len(self.texts)

    def select(self, rows):
        return _FakeHFDataset(self.texts[i] for i in rows)

    def iter(self, batch_size):
        for start in range(0, len(self.texts), batch_size):
            yield {"text": self.texts[start : start + batch_size]}


def test_lm1b_hugging_face_source_with_a_fake_datasets(monkeypatch):
    splits = {"train": ["a b , c .", "d e ."], "test": ["f !", "a ( b ) ."]}
    loaded = []

    def load_dataset(name, split, **kwargs):
        loaded.append((name, split))
        return _FakeHFDataset(splits[split])

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    dm = TextDataModule(source="lm1b", max_length=8)
    dm.check_files()
    assert list(dm.training_texts()) == ["a b, c.", "d e."]
    dm.attach_tokenizer(WordTokenizer())
    test = dm.heldout_dataset("test")
    assert _names(test) == ["lm1b/test line 1", "lm1b/test line 2"]
    assert _ids(test)[1][:5] == [CLS, A, UNK, UNK, SEP]  # "a (b) ." after detokenizing
    assert ("lm1b", "test") in loaded
    capped = TextDataModule(source="lm1b", max_lines=1)
    assert list(capped.training_texts()) == ["a b, c."]


def test_lm1b_hugging_face_source_errors(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(FileNotFoundError, match=r"genodiff-text\[hub\]"):
        TextDataModule(source="lm1b").check_files()

    def offline(name, split, **kwargs):
        raise ConnectionError("hub unreachable" if "revision" not in kwargs else "other")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=offline))
    with pytest.raises(FileNotFoundError, match="hub unreachable.*lm1b_release"):
        list(TextDataModule(source="lm1b").training_texts())
