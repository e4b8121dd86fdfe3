"""Sequences as the metrics see them: read from FASTA, coded by their alphabet, tiled into
windows.

The alphabet is the letters the samples are made of: the ``alphabet`` their domain declares
(``genodiff.domains``; DNA's is ACGT; ``genodiff.sample_files.sample_alphabet`` finds it for
sample files), passed to every metric that reads letters. A letter is coded by its place in the
alphabet (DNA: A=0, C=1, G=2, T=3), in either case (soft-masked lower-case bases count); every
other character (N, IUPAC ambiguity codes, gaps) is -1 and is skipped by every metric (a k-mer
holding one is not counted, a character outside the alphabet never matches).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from genodiff.errors import InputValueError

# Which letter pairs with which on the other strand, for the statistics that read both strands;
# an alphabet holding a letter without its partner has no reverse strand.
COMPLEMENTS = {"A": "T", "C": "G", "G": "C", "T": "A"}
# A file whose characters are less than this share of the alphabet's letters (the rest: N,
# ambiguity codes, gaps) is not of these sequences: English text is about a fifth A/C/G/T.
MIN_ALPHABET_SHARE = 0.5


def read_sequences(path: str | os.PathLike, alphabet: str) -> list[str]:
    """Upper-cased sequences of every record of a FASTA file (``.gz`` allowed; a ``.txt``
    with one sequence per line works too); ValueError when none holds a letter of
    ``alphabet``, or when fewer than ``MIN_ALPHABET_SHARE`` of the characters are its letters."""
    from genodiff.sample_files import read_samples  # imports torch: only when reading

    sequences = [seq.upper() for seq in read_samples(path)]
    coded = sum(int(np.count_nonzero(base_codes(seq, alphabet) >= 0)) for seq in sequences)
    total = sum(len(seq) for seq in sequences)
    letters = "/".join(alphabet)
    if coded == 0:
        raise InputValueError(f"{path} holds no {letters} letter: is it a file of such sequences?")
    if coded < MIN_ALPHABET_SHARE * total:
        raise InputValueError(
            f"{path}: only {coded / total:.0%} of its characters are {letters} letters (English "
            f"text, protein or another alphabet?); give a file of such sequences, where at "
            f"least {MIN_ALPHABET_SHARE:.0%} are"
        )
    return sequences


@lru_cache
def _code_table(alphabet: str) -> np.ndarray:
    """byte -> code (its letter's place in ``alphabet``, either case; -1 for any other byte);
    ValueError for an alphabet that is not 2 or more distinct ASCII letters."""
    letters = alphabet.upper()
    distinct = len(set(letters)) == len(letters)
    if len(letters) < 2 or not distinct or not (letters.isascii() and letters.isalpha()):
        raise InputValueError(f"an alphabet is 2 or more distinct ASCII letters, got {alphabet!r}")
    table = np.full(256, -1, dtype=np.int8)
    for code, letter in enumerate(letters):
        table[ord(letter)] = table[ord(letter.lower())] = code
    table.flags.writeable = False
    return table


def base_codes(seq: str, alphabet: str) -> np.ndarray:
    """int8 codes of ``seq``: a letter's place in ``alphabet`` (either case), -1 for anything
    else."""
    return _code_table(alphabet)[np.frombuffer(seq.encode("ascii", errors="replace"), np.uint8)]


def letter_code(alphabet: str, letter: str, statistic: str) -> int:
    """The code of ``letter`` in ``alphabet``; ValueError naming the ``statistic`` that
    counts it when the alphabet lacks it."""
    if letter not in alphabet.upper():
        raise InputValueError(f"{statistic} counts {letter}, which the alphabet {alphabet} lacks")
    return alphabet.upper().index(letter)


@lru_cache
def _complement_table(alphabet: str) -> np.ndarray:
    """code -> the code of its letter's partner (``COMPLEMENTS``); ValueError for an alphabet
    holding a letter whose partner it lacks."""
    letters = alphabet.upper()
    unpaired = [x for x in letters if x not in COMPLEMENTS or COMPLEMENTS[x] not in letters]
    if unpaired:
        raise InputValueError(
            f"the reverse strand needs each letter's partner; the alphabet {alphabet} has none "
            f"for {', '.join(unpaired)}"
        )
    return np.array([letters.index(COMPLEMENTS[x]) for x in letters], dtype=np.int8)


def reverse_complement_codes(codes: np.ndarray, alphabet: str) -> np.ndarray:
    """Codes (in ``alphabet``) of the reverse complement (A<->T, C<->G; -1 stays -1)."""
    flipped = codes[::-1]
    return np.where(flipped >= 0, _complement_table(alphabet)[flipped], -1).astype(np.int8)


def tile_windows(
    sequences: Sequence[str], length: int, alphabet: str, max_n_fraction: float = 0.5
) -> list[str]:
    """Records longer than ``length`` cut into consecutive non-overlapping windows of
    ``length`` (a shorter tail is dropped); shorter records kept whole. Windows (or records)
    whose fraction of characters outside ``alphabet`` exceeds ``max_n_fraction`` are
    dropped."""
    if length < 1:
        raise InputValueError(f"window length must be positive, got {length}")
    windows = []
    for seq in sequences:
        pieces = [seq] if len(seq) <= length else _tiles(seq, length)
        windows += [p for p in pieces if np.mean(base_codes(p, alphabet) < 0) <= max_n_fraction]
    return windows


def _tiles(seq: str, length: int) -> list[str]:
    return [seq[start : start + length] for start in range(0, len(seq) - length + 1, length)]


def evenly_spaced(items: Sequence[str], limit: int) -> list[str]:
    """At most ``limit`` of ``items``, spread evenly over them (all when there are fewer)."""
    if limit < 1:
        raise InputValueError(f"limit must be positive, got {limit}")
    if len(items) <= limit:
        return list(items)
    return [items[i] for i in np.linspace(0, len(items) - 1, limit).astype(int)]
