"""Text tokenizers for genodiff: a Hugging Face pretrained one (``hf``) and one trained on the
run's own training split (``trained``), both behind genodiff's ``Tokenizer`` contract.

Both keep a ``tokenizers`` (Rust) backend, whose whole JSON goes into ``to_state()``: a
checkpoint decodes and encodes exactly as in training without the original files, the Hugging
Face cache or ``transformers``.

Special ids (MDLM's conventions, kuleshov-group/mdlm ``dataloader.get_tokenizer`` and
``diffusion.Diffusion.__init__``):

- [MASK]: the tokenizer's own mask token when it has one (bert-base-uncased: ``[MASK]`` = 103,
  vocabulary 30,522); otherwise a new id appended after the backend's vocabulary (gpt2: mask =
  50,257, vocabulary 50,258, as the ``kuleshov-group/mdlm-owt`` model).
- BOS / EOS: the tokenizer's BOS / EOS tokens, else [CLS] / [SEP] (bert: [CLS] = 101,
  [SEP] = 102; gpt2: both ``<|endoftext|>`` = 50,256, as MDLM's ``BertProcessing`` wraps each
  gpt2 sentence in it).
- [PAD]: the tokenizer's pad token; a tokenizer without one (gpt2) pads with the appended
  mask id. This is what MDLM does: it adds a ``[PAD]`` token (id 50,257) and then appends the
  mask at ``tokenizer.vocab_size`` = 50,257 too, so pad and mask share one id. With
  ``wrap: true`` (the OWT setting, no padding at all) this changes nothing; with
  ``wrap: false`` padded positions read as [MASK], so ``objective.padding=bound`` (which scores
  [PAD]) is refused for such a tokenizer and ``upstream`` (which never scores it) is the one
  that works.

``sample_ids`` are all ids but [MASK] and [PAD]. A masked objective that corrupts [PAD]
(``objective.padding`` bound or upstream: the plugin's padded-text configs) may also draw
[PAD]: a sample then ends at its first [PAD] (``decode_sample``); a sample of padded sentences
is also ended at its first [EOS] before it is decoded (``TextDataModule.end_samples``).
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers import Tokenizer as Backend

from genodiff.errors import InputFileNotFoundError, InputImportError, InputValueError
from genodiff.hub import HubError, snapshot, unreadable_cache_entry
from genodiff.tokenizers.base import Tokenizer

# The special tokens of a trained tokenizer, in id order (bert-like).
TRAINED_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
TRAINED_KINDS = ("wordpiece", "bpe")
# How an appended mask (a tokenizer without one, e.g. gpt2) is written in text and templates.
APPENDED_MASK_TOKEN = "[MASK]"


class BackendTokenizer(Tokenizer):
    """Shared code: a ``tokenizers.Tokenizer`` backend plus the special ids.

    Subclasses call ``_set_backend`` with the backend and the special-token strings.
    """

    domain = "text"
    backend: Backend

    def _set_backend(
        self,
        backend: Backend,
        mask_token: str | None,
        pad_token: str | None,
        bos_token: str | None,
        eos_token: str | None,
    ) -> None:
        self.backend = backend
        self.backend_vocab_size = backend.get_vocab_size(with_added_tokens=True)

        def token_id(token: str | None) -> int | None:
            if token is None:
                return None
            index = backend.token_to_id(token)
            if index is None:
                raise InputValueError(f"the tokenizer has no token {token!r} in its vocabulary")
            return index

        mask_id = token_id(mask_token)
        # No mask token of its own: append one (MDLM: mask_index = vocab_size).
        self.appended_mask = mask_id is None
        self.mask_token = mask_token if mask_token is not None else APPENDED_MASK_TOKEN
        self.mask_id = mask_id if mask_id is not None else self.backend_vocab_size
        self.vocab_size = self.backend_vocab_size + int(self.appended_mask)
        pad_id = token_id(pad_token)
        self.pad_id = pad_id if pad_id is not None else self.mask_id
        self.bos_id = token_id(bos_token)
        self.eos_id = token_id(eos_token)
        self.special_tokens = {
            "mask_token": mask_token,
            "pad_token": pad_token,
            "bos_token": bos_token,
            "eos_token": eos_token,
        }
        # The id of words the vocabulary lacks (WordPiece's [UNK]); byte-level BPE has none.
        self.unk_token: str | None = getattr(backend.model, "unk_token", None)
        self.unk_id = backend.token_to_id(self.unk_token) if self.unk_token else None
        excluded = {self.mask_id, self.pad_id}
        self.sample_ids = tuple(i for i in range(self.vocab_size) if i not in excluded)
        # The special ids that mark a sequence ([CLS], [SEP], [PAD], [MASK], ...) rather than
        # stand for text, which decode_sample drops: the backend's special tokens and the
        # appended mask, but not the unknown token (a word of the text the vocabulary lacks).
        added = backend.get_added_tokens_decoder()
        special = {i for i, token in added.items() if token.special}
        marks = {self.mask_id, self.pad_id, self.bos_id, self.eos_id}
        self.control_ids = frozenset((special | marks) - {self.unk_id, None})

    def __len__(self) -> int:
        return self.vocab_size

    # ------------------------------------------------------------------ text <-> ids

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` without special tokens added (a special token written in the text,
        e.g. ``[MASK]``, is still recognised)."""
        return self.backend.encode(text, add_special_tokens=False).ids

    def encode_given(self, text: str) -> list[int]:
        """``encode``, refusing text the vocabulary maps to its unknown token (a user's prefix
        or template would otherwise lose those words from the sample), naming each such word;
        the unknown token written as such is kept."""
        encoding = self.backend.encode(text, add_special_tokens=False)
        spans = zip(encoding.ids, encoding.offsets, strict=True)
        unknown = [text[a:b] for i, (a, b) in spans if i == self.unk_id]
        unknown = [word for word in dict.fromkeys(unknown) if word != self.unk_token]
        if unknown:
            raise InputValueError(
                f"the tokenizer does not know {', '.join(repr(w) for w in unknown)}: "
                f"{'it' if len(unknown) == 1 else 'they'} would be {self.unk_token} and vanish "
                "from the sample; use words of its vocabulary"
            )
        return encoding.ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of data sentences (what the data module windows), in parallel in the backend.
        Unlike ``encode``, a special token's name written in a sentence (``[MASK]``, ``[PAD]``)
        is read as the text it is: data hold no mask (one made the NELBO infinite) and no
        padding inside a sentence."""
        reads_names = self.backend.encode_special_tokens
        self.backend.encode_special_tokens = True
        try:
            encodings = self.backend.encode_batch(list(texts), add_special_tokens=False)
        finally:
            self.backend.encode_special_tokens = reads_names
        return [e.ids for e in encodings]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """Text of a 1-D id sequence; special tokens are written as their names (``[CLS]``)
        unless ``skip_special_tokens``."""
        if hasattr(ids, "tolist"):
            if getattr(ids, "ndim", 1) != 1:
                raise ValueError(f"decode takes a 1-D id sequence, got shape {tuple(ids.shape)}")
            ids = ids.tolist()
        ids = [int(i) for i in ids]
        for i in ids:
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"token id {i} is outside the vocabulary [0, {self.vocab_size})")
        if not self.appended_mask or self.mask_id not in ids:
            return self.backend.decode(ids, skip_special_tokens=skip_special_tokens)
        # The appended mask is unknown to the backend: decode the pieces between masks and
        # join them with a space where neither side has one.
        parts: list[str] = []
        piece: list[int] = []
        for i in [*ids, None]:
            if i is not None and i != self.mask_id:
                piece.append(i)
                continue
            parts.append(self.backend.decode(piece, skip_special_tokens=skip_special_tokens))
            if i is not None and not skip_special_tokens:
                parts.append(self.mask_token)
            piece = []
        text = ""
        for part in filter(None, parts):
            gap = text and not text[-1].isspace() and not part[0].isspace()
            text += (" " if gap else "") + part
        return text

    def decode_sample(self, ids: Sequence[int]) -> str:
        """What a user reads for a generated sequence: it ends at its first [PAD] (a model that
        predicts padding, ``objective.padding``, ends its sentence there); the
        special tokens are dropped except a sentence end ([EOS]) inside the sample, written as
        the EOS token (`` [SEP] ``) so that ``encode_sample`` restores the boundary, and the
        unknown token (``[UNK]``), which stands for a word the vocabulary lacks: it is written
        as such, as ``encode_sample`` reads it back, never dropped from the text."""
        ids = [int(i) for i in (ids.tolist() if hasattr(ids, "tolist") else ids)]
        if self.pad_id in ids:
            ids = ids[: ids.index(self.pad_id)]
        sentences: list[list[int]] = [[]]
        for i in ids:
            if i == self.eos_id:
                sentences.append([])
            else:
                sentences[-1].append(i)
        control = self.control_ids
        texts = [self.decode([i for i in s if i not in control]).strip() for s in sentences]
        return f" {self.special_tokens['eos_token']} ".join(t for t in texts if t)

    def encode_sample(self, text: str) -> list[int]:
        """Ids of a sample as ``decode_sample`` wrote it, laid out as the data module lays out
        a window of several sentences (``wrap: true``, MDLM's ``_group_texts``): [BOS] first,
        and each EOS token written in the text is a sentence boundary, one [EOS] (no [BOS]
        after it: a wrapped stream has none). The rest is read as ``encode`` reads it: a drawn
        unknown word, written as the unknown token (``[UNK]``), is its id again."""
        eos_token = self.special_tokens["eos_token"]
        pieces = text.split(eos_token) if eos_token else [text]
        ids = [] if self.bos_id is None else [self.bos_id]
        for k, piece in enumerate(pieces):
            if k:
                ids.append(self.eos_id)
            ids += self.encode(piece.strip())
        return ids

    def encode_template(self, text: str) -> list[int]:
        """Ids of an infill template: each ``[MASK]`` (the mask token) written in ``text`` is one
        token to generate; [BOS] first, as ``encode_prefix``."""
        if not self.appended_mask:
            return super().encode_template(text)
        # The backend does not know the appended mask: split the text on it. The space before a
        # marker belongs to the generated token (byte-level BPE writes it as its prefix).
        pieces = text.split(self.mask_token)
        if len(pieces) == 1:
            return super().encode_template(text)  # raises: no mask marker
        ids = [self.bos_id] if self.bos_id is not None else []
        for k, piece in enumerate(pieces):
            last = k == len(pieces) - 1
            ids += self.encode_given(piece if last else piece.rstrip(" "))
            if not last:
                ids.append(self.mask_id)
        return ids

    # ------------------------------------------------------------------ persistence

    def _backend_state(self) -> dict[str, Any]:
        return {"tokenizer_json": self.backend.to_str(), **self.special_tokens}

    def _load_backend(self, state: dict[str, Any]) -> None:
        self._set_backend(
            Backend.from_str(state["tokenizer_json"]),
            state.get("mask_token"),
            state.get("pad_token"),
            state.get("bos_token"),
            state.get("eos_token"),
        )


class HFTokenizer(BackendTokenizer):
    """A pretrained Hugging Face tokenizer (``tokenizer: {name: hf, pretrained: NAME}``).

    ``pretrained`` is a hub name (``bert-base-uncased``, ``gpt2``) or a local folder that
    ``transformers.AutoTokenizer.from_pretrained`` reads. The local Hugging Face cache is tried
    first, then the hub. It needs ``transformers`` (``pip install 'genodiff-text[hub]'``) and a
    fast tokenizer; once built, only its backend JSON is kept.
    """

    name = "hf"

    def __init__(self, pretrained: str = "bert-base-uncased", cache_dir: str | None = None):
        self.pretrained = str(pretrained)
        self.cache_dir = cache_dir
        hf = _auto_tokenizer(self.pretrained, cache_dir)
        backend = getattr(hf, "backend_tokenizer", None)
        if backend is None:
            raise InputValueError(
                f"tokenizer.pretrained={self.pretrained!r} has no fast (Rust) tokenizer; use a "
                "model with a tokenizer.json, or tokenizer.name=trained"
            )
        refuse_empty_vocabulary(hf, f"tokenizer.pretrained={self.pretrained!r}")
        backend = Backend.from_str(backend.to_str())  # a copy the HF object does not share
        self._set_backend(
            backend,
            mask_token=_token_str(hf.mask_token),
            pad_token=_token_str(hf.pad_token),
            bos_token=_token_str(hf.bos_token) or _token_str(hf.cls_token),
            eos_token=_token_str(hf.eos_token) or _token_str(hf.sep_token),
        )

    def to_state(self) -> dict[str, Any]:
        return {"pretrained": self.pretrained, **self._backend_state()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> HFTokenizer:
        tokenizer = cls.__new__(cls)  # no Hugging Face lookup: the state holds everything
        tokenizer.pretrained = state.get("pretrained", "?")
        tokenizer.cache_dir = None
        tokenizer._load_backend(state)
        return tokenizer


def refuse_empty_vocabulary(hf_tokenizer: Any, source: str, parameter: str | None = None) -> None:
    """InputValueError when the ``transformers`` tokenizer ``hf_tokenizer`` (loaded from
    ``source``, as the message names it) has an empty vocabulary: what transformers builds from
    a model folder or Hub repository without tokenizer files, which reads every text as no
    tokens at all. Checked once, when the tokenizer is loaded."""
    if hf_tokenizer.vocab_size == 0:
        raise InputValueError(
            f"{source} gives a tokenizer with an empty vocabulary (its folder or Hub repository "
            "holds no tokenizer files: tokenizer.json, or vocab.txt, or vocab.json and "
            "merges.txt); point it at a folder or Hub id that has them",
            parameter=parameter,
        )


def _token_str(token: Any) -> str | None:
    return None if token is None else str(token)


# The files of a Hub model its tokenizer is read from (no weights).
TOKENIZER_FILES = ("*.json", "*.txt", "*.model")
NEEDS_TOKENIZER_FILES = (
    "it needs that model's tokenizer files (tokenizer.json, or vocab.txt / vocab.json and "
    "merges.txt, with tokenizer_config.json)"
)


# The overrides that replace a tokenizer section by a vocabulary trained on the data, as typed
# in a shell: Hydra merges `tokenizer={...}` into the section, which refuses the new keys.
TRAIN_ONE_INSTEAD = "'~tokenizer' '+tokenizer={name: trained, kind: wordpiece, vocab_size: 8192}'"


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else ""


def _auto_tokenizer(pretrained: str, cache_dir: str | None) -> Any:
    """``AutoTokenizer.from_pretrained``: local folder or cache first, then the hub."""
    hint = (
        "Either make it available (run once where the Hugging Face hub is reachable: "
        f'python -c "from transformers import AutoTokenizer; AutoTokenizer.from_pretrained('
        f"'{pretrained}')\", which fills ~/.cache/huggingface; or copy that model's tokenizer "
        "files into a folder and set tokenizer.pretrained=/path/to/folder), or train a "
        f"tokenizer on the data instead: {TRAIN_ONE_INSTEAD}"
    )
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise InputImportError(
            f"tokenizer.name=hf needs transformers to read {pretrained!r}: pip install "
            f"'genodiff-text[hub]' (or pip install transformers). {hint}"
        ) from None
    folder = Path(pretrained).expanduser()
    if folder.exists():
        if not folder.is_dir():
            raise InputValueError(f"tokenizer.pretrained={pretrained!r} is a file, not a folder")
        try:
            return AutoTokenizer.from_pretrained(str(folder), use_fast=True)
        except Exception as err:  # missing, malformed or unreadable tokenizer files
            raise InputValueError(
                f"cannot read a Hugging Face tokenizer from the folder {pretrained!r} "
                f"({type(err).__name__}: {_first_line(err)}); {NEEDS_TOKENIZER_FILES}"
            ) from None
    try:
        return AutoTokenizer.from_pretrained(
            pretrained, cache_dir=cache_dir, use_fast=True, local_files_only=True
        )
    except Exception:  # not cached, or damaged there: told apart below
        pass
    try:  # the core's download (cache only under HF_HUB_OFFLINE): transformers' own retries an
        # unreachable hub for a minute
        folder = snapshot(pretrained, TOKENIZER_FILES, cache_dir)
    except Exception as err:
        why = (
            err
            if isinstance(err, HubError)
            else f"the hub did not give it ({type(err).__name__}: {_first_line(err)})"
        )
        raise InputFileNotFoundError(
            f"cannot load the Hugging Face tokenizer {pretrained!r}: as a Hub id {why}. {hint}"
        ) from None
    try:
        return AutoTokenizer.from_pretrained(str(folder), use_fast=True)
    except Exception as err:  # a damaged cache entry, or a repository without tokenizer files
        reason = unreadable_cache_entry(folder) or (
            f"its files in the cache ({folder}) do not load ({type(err).__name__}: "
            f"{_first_line(err)}); {NEEDS_TOKENIZER_FILES}"
        )
        raise InputValueError(
            f"cannot load the Hugging Face tokenizer {pretrained!r}: {reason}"
        ) from None


class TrainedTokenizer(BackendTokenizer):
    """A WordPiece or byte-level BPE vocabulary trained on the run's training split.

    ``tokenizer: {name: trained, kind: wordpiece|bpe, vocab_size: 4096, lowercase: true}``.
    Special tokens are bert-like: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4 (BOS = [CLS],
    EOS = [SEP]); ``[MASK]`` written in a text is the mask token. ``wordpiece`` uses BERT's
    normalizer (clean-up, CJK spacing, lower case and accents stripped when ``lowercase``) and
    pre-tokenizer; ``bpe`` is GPT-2's byte-level BPE (no unknown token), lower-cased when
    ``lowercase``. Training is deterministic for the same texts and settings. The trained
    vocabulary is saved with the run (``to_state``), so a checkpoint is never retrained.
    """

    name = "trained"

    def __init__(
        self,
        kind: str = "wordpiece",
        vocab_size: int = 4096,
        lowercase: bool = True,
        min_frequency: int = 2,
    ) -> None:
        if kind not in TRAINED_KINDS:
            raise InputValueError(
                f"tokenizer.kind must be one of {', '.join(TRAINED_KINDS)}, got {kind!r}"
            )
        floor = len(TRAINED_SPECIAL_TOKENS) + (256 if kind == "bpe" else 1)
        if int(vocab_size) < floor:
            raise InputValueError(
                f"tokenizer.vocab_size={vocab_size} is too small for kind {kind!r}: give at "
                f"least {floor} (e.g. 4096)"
            )
        if int(min_frequency) < 1:
            raise InputValueError(f"tokenizer.min_frequency must be >= 1, got {min_frequency}")
        self.kind = kind
        self.target_vocab_size = int(vocab_size)
        self.lowercase = bool(lowercase)
        self.min_frequency = int(min_frequency)
        self.trained = False

    def settings(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "vocab_size": self.target_vocab_size,
            "lowercase": self.lowercase,
            "min_frequency": self.min_frequency,
        }

    def __getattr__(self, item: str) -> Any:
        # Ids and the backend exist only once trained (or loaded): say so instead of a bare
        # AttributeError.
        if item in ("backend", "mask_id", "pad_id", "bos_id", "eos_id", "sample_ids"):
            raise AttributeError(
                f"the trained tokenizer has no {item} before it is trained: build it with "
                "TrainedTokenizer.from_config(config, corpus) or train(texts)"
            )
        raise AttributeError(item)

    def _untrained(self) -> Backend:
        if self.kind == "wordpiece":
            backend = Backend(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
            backend.normalizer = normalizers.BertNormalizer(
                clean_text=True,
                handle_chinese_chars=True,
                strip_accents=None,  # follows lowercase, as BERT
                lowercase=self.lowercase,
            )
            backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
            backend.decoder = decoders.WordPiece(prefix="##")
        else:
            backend = Backend(models.BPE())
            steps = [normalizers.NFC()] + ([normalizers.Lowercase()] if self.lowercase else [])
            backend.normalizer = normalizers.Sequence(steps)
            backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
            backend.decoder = decoders.ByteLevel()
        return backend

    def _trainer(self) -> trainers.BpeTrainer:
        return trainers.BpeTrainer(
            vocab_size=self.target_vocab_size,
            min_frequency=self.min_frequency,
            special_tokens=[
                AddedToken(t, special=True, lstrip=t == "[MASK]") for t in TRAINED_SPECIAL_TOKENS
            ],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )

    def train(self, texts: Iterable[str]) -> TrainedTokenizer:
        """Learn the vocabulary from ``texts`` (one sentence each); returns self."""
        backend = self._untrained()
        count = [0]

        def counted() -> Iterable[str]:
            for text in texts:
                count[0] += 1
                yield text

        if self.kind == "wordpiece":
            # tokenizers' WordPiece trainer numbers the "##" alphabet in hash-map order, so its
            # ids and its tie-breaks (hence the vocabulary) change from run to run: count the
            # words with the backend, then merge deterministically here.
            words = count_words(backend, counted())
            vocab = train_wordpiece(
                words, self.target_vocab_size, self.min_frequency, TRAINED_SPECIAL_TOKENS
            )
            trained = self._untrained()
            trained.model = models.WordPiece(
                vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=100
            )
            trained.add_special_tokens(list(TRAINED_SPECIAL_TOKENS))
            backend = trained
        else:  # byte-level BPE: tokenizers' trainer is deterministic here
            backend.train_from_iterator(counted(), trainer=self._trainer())
        if count[0] == 0:
            raise InputValueError(
                "cannot train the tokenizer: the training split has no text; check data.path"
            )
        self._set_backend(backend, "[MASK]", "[PAD]", "[CLS]", "[SEP]")
        self.trained = True
        return self

    @classmethod
    def from_config(
        cls, config: dict[str, Any], corpus: Callable[[], Iterable[str]] | None = None
    ) -> TrainedTokenizer:
        if corpus is None:
            raise InputValueError(
                "tokenizer.name=trained learns its vocabulary from the training data, but no "
                "corpus was given (the data module's training_texts)"
            )
        return cls(**config).train(corpus())

    def to_state(self) -> dict[str, Any]:
        if not self.trained:
            raise ValueError("an untrained tokenizer has no state to save; train it first")
        return {**self.settings(), **self._backend_state()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> TrainedTokenizer:
        settings = {k: state[k] for k in ("kind", "vocab_size", "lowercase", "min_frequency")}
        tokenizer = cls(**settings)
        tokenizer._load_backend(state)
        tokenizer.trained = True
        return tokenizer


# ---------------------------------------------------------------------- WordPiece training


def count_words(backend: Backend, texts: Iterable[str], batch: int = 4096) -> Counter[str]:
    """Occurrences of every pre-tokenized word of ``texts`` after ``backend``'s normalizer
    and pre-tokenizer.

    Texts are normalized ``batch`` at a time (joined by newlines). The pre-tokenizer (BERT's:
    split on whitespace, then around punctuation) runs once per distinct whitespace-separated
    chunk, which gives the same words as running it on the whole text, much faster.
    """
    chunks: Counter[str] = Counter()
    normalizer = backend.normalizer
    pending: list[str] = []

    def flush() -> None:
        text = "\n".join(pending)
        if normalizer is not None:
            text = normalizer.normalize_str(text)
        chunks.update(text.split())
        pending.clear()

    for text in texts:
        pending.append(text)
        if len(pending) >= batch:
            flush()
    if pending:
        flush()
    counts: Counter[str] = Counter()
    for chunk, n in chunks.items():
        for word, _ in backend.pre_tokenizer.pre_tokenize_str(chunk):
            counts[word] += n
    return counts


def train_wordpiece(
    word_counts: Mapping[str, int],
    vocab_size: int,
    min_frequency: int,
    special_tokens: Sequence[str],
    prefix: str = "##",
) -> dict[str, int]:
    """A WordPiece vocabulary (token -> id) learnt as BERT's: byte-pair merges over words split
    into a first character and ``prefix``-marked continuation characters.

    Ids: the special tokens, then the alphabet in sorted order, then each new merged token in
    merge order. Each step merges the most frequent adjacent pair (ties: the smallest pair as
    strings) until ``vocab_size`` tokens or no pair occurs ``min_frequency`` times. The result
    depends only on the counts: the same texts give the same vocabulary in every process.
    """
    words = sorted(word_counts.items())
    symbols = [[w[0]] + [prefix + c for c in w[1:]] for w, _ in words]
    freq = [c for _, c in words]
    vocab: dict[str, int] = {}
    for token in [*special_tokens, *sorted({s for syms in symbols for s in syms})]:
        vocab.setdefault(token, len(vocab))

    pair_count: dict[tuple[str, str], int] = defaultdict(int)
    where: dict[tuple[str, str], set[int]] = defaultdict(set)
    for i, syms in enumerate(symbols):
        for pair in zip(syms, syms[1:], strict=False):
            pair_count[pair] += freq[i]
            where[pair].add(i)
    heap = [(-c, a, b) for (a, b), c in pair_count.items()]
    heapq.heapify(heap)

    while len(vocab) < vocab_size and heap:
        negative, a, b = heapq.heappop(heap)
        if pair_count.get((a, b), 0) != -negative:
            continue  # stale entry
        if -negative < min_frequency:
            break
        merged = a + b[len(prefix) :]
        vocab.setdefault(merged, len(vocab))
        touched: set[tuple[str, str]] = set()
        for i in sorted(where.pop((a, b))):
            syms = symbols[i]
            for pair in zip(syms, syms[1:], strict=False):
                pair_count[pair] -= freq[i]
                touched.add(pair)
            out, k = [], 0
            while k < len(syms):
                if k + 1 < len(syms) and syms[k] == a and syms[k + 1] == b:
                    out.append(merged)
                    k += 2
                else:
                    out.append(syms[k])
                    k += 1
            symbols[i] = out
            for pair in zip(out, out[1:], strict=False):
                pair_count[pair] += freq[i]
                where[pair].add(i)
                touched.add(pair)
        pair_count.pop((a, b), None)
        for pair in touched:
            count = pair_count.get(pair, 0)
            if count <= 0:
                pair_count.pop(pair, None)
                where.pop(pair, None)
            elif pair != (a, b):
                heapq.heappush(heap, (-count, *pair))
    return vocab
