"""Character-level DNA tokenizer with the Caduceus / HyenaDNA token ids.

Ids: ``[CLS]=0 [SEP]=1 [BOS]=2 [MASK]=3 [PAD]=4 [RESERVED]=5 [UNK]=6 A=7 C=8 G=9 T=10 N=11``.
Models pad the vocabulary to 16 (a multiple of 8); ids 12..15 are never produced by
``encode`` and map to themselves in the complement map. ``[SEP]`` is the end-of-sequence token.

Encoding is case-insensitive (soft-masked lowercase bases become ordinary bases, never
``[UNK]``); the IUPAC ambiguity codes R Y S W K M B D H V become N. Any other character is an
error rather than a silent ``[UNK]``, so corrupt input is noticed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np
import torch

from genodiff.errors import InputValueError
from genodiff.registry import register_tokenizer
from genodiff.tokenizers.base import Tokenizer

SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[BOS]", "[MASK]", "[PAD]", "[RESERVED]", "[UNK]")
BASES = "ACGTN"
IUPAC_AMBIGUITY = "RYSWKMBDHV"
# Complement of every letter that reverse_complement accepts (upper case; lower case mirrors it).
_DNA_COMPLEMENT = {
    "A": "T", "C": "G", "G": "C", "T": "A", "N": "N",
    "R": "Y", "Y": "R", "S": "S", "W": "W", "K": "M", "M": "K",
    "B": "V", "V": "B", "D": "H", "H": "D",
}  # fmt: skip

Ids = TypeVar("Ids", list, np.ndarray, torch.Tensor)


@register_tokenizer("dna")
class DNATokenizer(Tokenizer):
    """Maps DNA strings to Caduceus token ids and back.

    ``decode`` writes bases and N as letters and every special token as its bracketed name
    (``"[MASK]"``, ``"[PAD]"``, ...); ids 12..15 (vocabulary padding) decode as ``"[UNK]"``.
    Pass ``skip_special_tokens=True`` to keep only A/C/G/T/N. Samplers draw A/C/G/T only
    (``sample_ids``); a generated sequence reads any other id as N (``decode_sample``).
    """

    name = "dna"
    domain = "dna"
    unit = "bp"
    vocab_size = len(SPECIAL_TOKENS) + len(BASES)  # 12
    padded_vocab_size = 16  # vocab_size rounded up to a multiple of 8

    def __init__(self) -> None:
        self.tokens: list[str] = [*SPECIAL_TOKENS, *BASES]
        self.token_to_id: dict[str, int] = {tok: i for i, tok in enumerate(self.tokens)}
        self.cls_id = self.token_to_id["[CLS]"]
        self.eos_id = self.sep_id = self.token_to_id["[SEP]"]
        self.bos_id = self.token_to_id["[BOS]"]
        self.mask_id = self.token_to_id["[MASK]"]
        self.pad_id = self.token_to_id["[PAD]"]
        self.unk_id = self.token_to_id["[UNK]"]
        self.n_id = self.token_to_id["N"]
        self.base_ids: tuple[int, ...] = tuple(self.token_to_id[b] for b in "ACGT")
        self.sample_ids = self.base_ids

        # byte -> id; -1 marks a byte that is not a valid nucleotide code.
        self._lookup = np.full(256, -1, dtype=np.int64)
        for letter in BASES:
            for char in (letter, letter.lower()):
                self._lookup[ord(char)] = self.token_to_id[letter]
        for letter in IUPAC_AMBIGUITY:
            for char in (letter, letter.lower()):
                self._lookup[ord(char)] = self.n_id

        complement = list(range(self.padded_vocab_size))
        for base, comp in zip("ACGT", "TGCA", strict=True):
            complement[self.token_to_id[base]] = self.token_to_id[comp]
        self.complement_map: list[int] = complement
        self._complement_np = np.asarray(complement, dtype=np.int64)
        self._complement_torch = torch.tensor(complement, dtype=torch.long)

        pairs = {**_DNA_COMPLEMENT, **{k.lower(): v.lower() for k, v in _DNA_COMPLEMENT.items()}}
        self._rc_table = str.maketrans(pairs)

    def __len__(self) -> int:
        return self.vocab_size

    def encode_array(self, seq: str) -> np.ndarray:
        """Token ids of ``seq`` as an int64 array of shape [len(seq)] (vectorised)."""
        try:
            raw = seq.encode("ascii")
        except UnicodeEncodeError as err:
            raise self._bad_char(seq, err.start) from None
        ids = self._lookup[np.frombuffer(raw, dtype=np.uint8)]
        if ids.size and ids.min() < 0:
            raise self._bad_char(seq, int(np.argmax(ids < 0)))
        return ids

    def encode(self, seq: str) -> list[int]:
        """Token ids of ``seq``: ``encode("ACGTN") == [7, 8, 9, 10, 11]``."""
        return self.encode_array(seq).tolist()

    @staticmethod
    def _bad_char(seq: str, pos: int) -> InputValueError:
        return InputValueError(
            f"cannot tokenize character {seq[pos]!r} at position {pos}: DNA input may contain "
            f"only A, C, G, T, N (any case) and the IUPAC codes {IUPAC_AMBIGUITY}; "
            "remove or replace that character"
        )

    def decode(
        self, ids: Sequence[int] | np.ndarray | torch.Tensor, skip_special_tokens: bool = False
    ) -> str:
        """Text of a 1-D id sequence (see the class docstring for how specials are written)."""
        if isinstance(ids, torch.Tensor | np.ndarray):
            if ids.ndim != 1:
                raise ValueError(f"decode takes a 1-D id sequence, got shape {tuple(ids.shape)}")
            ids = ids.tolist()
        out = []
        for i in ids:
            if not 0 <= i < self.padded_vocab_size:
                raise ValueError(
                    f"token id {i} is outside the vocabulary [0, {self.padded_vocab_size})"
                )
            tok = self.tokens[i] if i < self.vocab_size else "[UNK]"
            if skip_special_tokens and len(tok) > 1:
                continue
            out.append(tok)
        return "".join(out)

    def decode_sample(self, ids: Sequence[int] | np.ndarray | torch.Tensor) -> str:
        """Bases as letters; anything that is not A/C/G/T/N (a special token) as N, so the
        sequence keeps its length."""
        allowed = set(self.base_ids) | {self.n_id}
        return self.decode([i if i in allowed else self.n_id for i in np.asarray(ids).tolist()])

    def encode_sample(self, text: str) -> list[int]:
        """A generated sequence's ids as they are: DNA windows start with a base, no [BOS]."""
        return self.encode(text)

    def encode_prefix(self, text: str) -> list[int]:
        """A prefix of upper- or lower-case A/C/G/T (no [BOS]: DNA windows start with a base)."""
        if not text:
            raise InputValueError(
                "the prefix is empty; give bases such as ACGTTG", parameter="prefix"
            )
        _check_letters(
            text,
            "ACGTacgt",
            "the prefix",
            "A, C, G or T (either case); a prefix is fixed bases: to generate positions inside "
            "a sequence, give an infill template (N where it generates)",
            parameter="prefix",
        )
        return self.encode(text.upper())

    def encode_template(self, text: str) -> list[int]:
        """Upper-case A/C/G/T are kept; N and lower-case letters (a, c, g, t, n) become
        [MASK], the positions to generate."""
        _check_letters(text, "ACGTNacgtn", "the infill template", "A/C/G/T/N", parameter="infill")
        return [self.mask_id if c not in "ACGT" else self.token_to_id[c] for c in text]

    def reverse_complement_ids(self, ids: Ids) -> Ids:
        """``complement_map[flip(ids)]`` along the last axis; same type (and device) as ``ids``."""
        if isinstance(ids, torch.Tensor):
            table = self._complement_torch.to(ids.device)
            return table[ids.flip(-1)]
        if isinstance(ids, np.ndarray):
            return self._complement_np[ids[..., ::-1]]
        return [self.complement_map[i] for i in reversed(ids)]

    def reverse_complement(self, seq: str) -> str:
        """Reverse complement of a DNA string, keeping case (IUPAC codes are complemented too)."""
        self.encode_array(seq)  # raises, naming the character, on anything that is not DNA
        return seq.translate(self._rc_table)[::-1]


def _check_letters(text: str, allowed: str, what: str, expected: str, parameter: str) -> None:
    """InputValueError (``parameter``) naming the first letter of ``text`` not in ``allowed``."""
    for position, letter in enumerate(text, start=1):
        if letter not in allowed:
            raise InputValueError(
                f"{what}: {letter!r} at position {position} is not {expected}",
                parameter=parameter,
            )
