"""Generative perplexity of samples, reported with their diversity (``genodiff gen-ppl``).

Gen PPL (the MDLM paper's sample-quality number) scores generated samples with an
autoregressive (exact-likelihood) model, a ``SampleScorer`` (``genodiff.scorers``): by default
an AR checkpoint of genodiff's, or a scorer a plugin registers by name (``--scorer NAME``, with
``--scorer-model MODEL`` or the scorer's default model; e.g. the text plugin's ``hf``, a Hugging
Face causal LM such as the paper's GPT-2). With a checkpoint, each sample is encoded
with its tokenizer as training sequences begin (``tokenizer.encode_sample``: DNA as it is;
text with its [BOS]/[CLS] first and its sentence boundaries, as the data module lays out
sentences), and scored by the checkpoint's own loss with its EMA weights, as the AR objective
scores a window: a sample led by [BOS] is read as it is and [BOS] is never predicted (no
second [BOS]), any other is read after the objective's [BOS]. A sample longer than
``max_length`` (default: the scorer's window, a checkpoint's training window) is scored in
windows of ``max_length`` tokens advancing by ``stride`` (default ``max_length // 2``): each
token is scored once, every window after the first with the ``max_length - stride`` tokens
before it as context, so a long sample is not cut into pieces that restart without context.
Windows of a batch are right-padded with the scorer's ``pad_id``, never scored; each sample's
NLL is summed in float64. Tokens a checkpoint cannot generate (ids outside
``tokenizer.sample_ids``, e.g. N in DNA) are read as context but not scored, as training
windows store them ([PAD]); their number is reported. The result names the scorer and its
convention (``scoring``).

Estimator. Sample i has NLL S_i (nats, summed over its chunks) and n_i scored tokens.
Gen PPL = exp(R) with R = sum S_i / sum n_i (the corpus-level definition), its standard
error by the delta method over samples (``genodiff.evaluate.ratio_and_se``); the mean over
samples of the per-sample perplexity exp(S_i / n_i) is reported beside it.

A low Gen PPL from repetitive samples is no win, so the samples' diversity comes with it,
computed on their token ids under the scorer's tokenizer (and on a reference set of real data
when one is given, for comparison): the mean over samples of the unigram token entropy in
nats (the MDLM paper's entropy), and corpus-level distinct-n for n = 1..4 (unique n-grams
over all n-grams; an n-gram never spans two samples).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from genodiff import registry
from genodiff.errors import InputFileNotFoundError, InputValueError
from genodiff.evaluate import ratio_and_se
from genodiff.progress import Progress
from genodiff.sample_files import check_sample_file, format_owner, read_samples
from genodiff.scorers import CheckpointScorer, SampleScorer, registered_scorer

DISTINCT_N = (1, 2, 3, 4)


# --------------------------------------------------------------------------- diversity


def unigram_entropy(ids: Sequence[int] | np.ndarray) -> float:
    """Entropy in nats of the token frequencies of one sequence (0 for an empty one)."""
    ids = np.asarray(ids)
    if ids.size == 0:
        return 0.0
    _, counts = np.unique(ids, return_counts=True)
    p = counts / ids.size
    return float(-(p * np.log(p)).sum())


def distinct_n(sequences: Sequence[Sequence[int] | np.ndarray], n: int) -> float | None:
    """Unique n-grams over all n-grams of ``sequences`` (n-grams never span two sequences);
    None when no sequence has n tokens."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    grams = [
        np.lib.stride_tricks.sliding_window_view(np.asarray(seq, dtype=np.int64), n)
        for seq in sequences
        if len(seq) >= n
    ]
    if not grams:
        return None
    stacked = np.concatenate(grams)  # (total n-grams, n)
    return len(np.unique(stacked, axis=0)) / len(stacked)


@dataclass
class Diversity:
    """Diversity of a set of token sequences."""

    sequences: int
    tokens: int
    entropy: float  # mean over sequences of the unigram token entropy, nats
    distinct_1: float | None
    distinct_2: float | None
    distinct_3: float | None
    distinct_4: float | None

    @classmethod
    def of(cls, sequences: Sequence[Sequence[int] | np.ndarray]) -> Diversity:
        if not sequences:
            raise ValueError("diversity needs at least one sequence")
        distinct = {f"distinct_{n}": distinct_n(sequences, n) for n in DISTINCT_N}
        return cls(
            sequences=len(sequences),
            tokens=sum(len(s) for s in sequences),
            entropy=float(np.mean([unigram_entropy(s) for s in sequences])),
            **distinct,
        )


# --------------------------------------------------------------------------- Gen PPL


@dataclass
class GenPPLResult:
    """What ``genodiff gen-ppl`` reports (``to_dict`` is its JSON object)."""

    checkpoint: str  # the scorer: an AR checkpoint's path, a Hugging Face model's id or folder
    objective: str
    scoring: str  # which tokens are scored and how (the convention)
    samples_file: str | None
    samples: int
    tokens: int  # scored
    context_only_tokens: int  # read as context, not scored (ids outside sample_ids)
    chunks: int
    max_length: int
    stride: int
    batch_size: int
    nll: float  # nats per scored token, corpus level
    nll_se: float | None
    gen_ppl: float
    gen_ppl_se: float | None
    per_sample_ppl_mean: float
    per_sample_ppl_se: float | None
    diversity: Diversity
    reference_file: str | None = None
    reference_diversity: Diversity | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        def pm(se: float | None, digits: int = 4) -> str:
            return f" +- {se:.{digits}f}" if se is not None else ""

        rows = [
            ("checkpoint", f"{self.checkpoint} (objective {self.objective})"),
            ("scoring", self.scoring),
            ("samples", f"{self.samples} from {self.samples_file or '(in memory)'}"),
            (
                "tokens",
                f"{self.tokens} scored in {self.chunks} window(s) of <= {self.max_length}, "
                f"stride {self.stride}"
                + (
                    f"; {self.context_only_tokens} context-only (not generable)"
                    if self.context_only_tokens
                    else ""
                ),
            ),
            ("NLL (exact)", f"{self.nll:.4f}{pm(self.nll_se)} nats/token"),
            ("Gen PPL", f"{self.gen_ppl:.4f}{pm(self.gen_ppl_se)} (exp of the corpus NLL)"),
            (
                "per-sample PPL",
                f"{self.per_sample_ppl_mean:.4f}{pm(self.per_sample_ppl_se)} (mean over samples)",
            ),
        ]
        lines = [f"{label:<16}{value}" for label, value in rows]
        columns = [("samples", self.diversity)]
        if self.reference_diversity is not None:
            columns.append(("reference", self.reference_diversity))
        lines.append(f"{'diversity':<16}" + "".join(f"{name:>12}" for name, _ in columns))
        stats = [("entropy (nats)", "entropy")] + [
            (f"distinct-{n}", f"distinct_{n}") for n in DISTINCT_N
        ]
        for label, key in stats:
            values = [getattr(d, key) for _, d in columns]
            lines.append(
                f"  {label:<14}"
                + "".join(f"{'-':>12}" if v is None else f"{v:>12.4f}" for v in values)
            )
        if self.reference_file is not None:
            lines.append(f"{'reference':<16}{self.reference_file}")
        return "\n".join(lines)


def encode_samples(samples: Sequence[str], scorer: SampleScorer) -> list[np.ndarray]:
    """Ids of every sample (``scorer.encode``); ValueError naming a sample that fails or
    encodes to nothing."""
    out = []
    for i, text in enumerate(samples):
        try:
            ids = np.asarray(scorer.encode(text), dtype=np.int64)
        except InputValueError as err:
            raise InputValueError(f"sample {i}: {err}") from None
        if ids.size == 0:
            blank = " (it is empty: a blank line of a .txt file is an empty sample)"
            raise InputValueError(f"sample {i} encodes to no token{'' if text else blank}")
        out.append(ids)
    return out


def reference_like(
    reference: Sequence[np.ndarray], samples: Sequence[np.ndarray], scorer: SampleScorer
) -> list[np.ndarray]:
    """The reference's ids as the samples are, so that their diversity compares like with
    like (distinct-n falls as a set grows; a whole chromosome is one record): records longer
    than the samples' median length cut into consecutive windows of it (a shorter tail
    dropped; a shorter record kept whole), those holding a token the scorer reads only as
    context (DNA: N) left out, and as many as there are samples taken, spread evenly (as
    ``genodiff evaluate-samples`` takes its reference windows). InputValueError when none is
    left."""
    window = int(np.median([len(ids) for ids in samples]))
    pieces = [
        piece
        for ids in reference
        for piece in ([ids] if len(ids) <= window else _tiles(ids, window))
        if np.array_equal(scorer.mark_context_only(piece)[0], piece)
    ]
    if not pieces:
        raise InputValueError(
            f"the reference holds no window of {window} tokens without a token the scorer "
            "cannot generate (DNA: N); give real sequences of A/C/G/T",
            parameter="reference",
        )
    picks = np.linspace(0, len(pieces) - 1, min(len(pieces), len(samples))).astype(int)
    return [pieces[i] for i in picks]


def _tiles(ids: np.ndarray, length: int) -> list[np.ndarray]:
    return [ids[start : start + length] for start in range(0, len(ids) - length + 1, length)]


@dataclass
class Chunk:
    """One window of a sample: ``ids`` from token ``start`` of sample ``sample``, of which the
    tokens from index ``first_new`` of the window on are scored (those before are context
    already scored by the previous window)."""

    sample: int
    start: int
    ids: np.ndarray
    first_new: int


def sliding_chunks(sample: int, ids: np.ndarray, max_length: int, stride: int) -> list[Chunk]:
    """Windows of at most ``max_length`` tokens advancing by ``stride``: every token is scored
    once, the first window's from the start, each later window's after ``max_length - stride``
    tokens of context (the previous window's last ones)."""
    chunks, start, covered = [], 0, 0
    while True:
        stop = min(start + max_length, len(ids))
        chunks.append(Chunk(sample, start, ids[start:stop], covered - start))
        if stop == len(ids):
            return chunks
        covered, start = stop, start + stride


@torch.no_grad()
def score_chunks(
    scorer: SampleScorer,
    encoded: Sequence[np.ndarray],
    max_length: int,
    stride: int,
    batch_size: int,
    progress: Progress | None = None,
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Per sample: (NLL in nats (N,), scored tokens (N,)), then the number of chunks and of
    context-only tokens; windows of at most ``max_length`` tokens advancing by ``stride``
    (``max_length``: no overlap), ``batch_size`` at a time, each sample's NLL summed in
    float64."""
    if not 1 <= stride <= max_length:
        raise InputValueError(
            f"stride must be in [1, {max_length}] (the window), got {stride}", parameter="stride"
        )
    if stride == max_length and not scorer.scores_windows_afresh:
        raise InputValueError(
            f"stride must be below the window ({max_length}) for {scorer.name}, which "
            f"reads every window after the first with context; got {stride}",
            parameter="stride",
        )
    chunks: list[Chunk] = []
    context_only = 0
    for i, ids in enumerate(encoded):
        ids, unscored = scorer.mark_context_only(ids)
        context_only += unscored
        chunks += sliding_chunks(i, ids, max_length, stride)
    device = scorer.device
    sums = np.zeros(len(encoded), dtype=np.float64)
    counts = np.zeros(len(encoded), dtype=np.int64)
    for begin in range(0, len(chunks), batch_size):
        batch = chunks[begin : begin + batch_size]
        width = max(len(c.ids) for c in batch)
        ids = torch.full((len(batch), width), scorer.pad_id, dtype=torch.long)
        for row, chunk in enumerate(batch):
            ids[row, : len(chunk.ids)] = torch.from_numpy(chunk.ids)
        lengths = torch.tensor([len(c.ids) for c in batch], device=device)  # (B,)
        # a window that continues a sample is read as it is: its first tokens are context
        continues = torch.tensor([c.first_new > 0 for c in batch], device=device)  # (B,)
        nll, scored, targets_at = scorer.window_nll(ids.to(device), lengths, continues)
        first_new = torch.tensor([c.first_new for c in batch], device=device)[:, None]
        scored = scored & (targets_at >= first_new)  # (B, W): context is not scored again
        nll = torch.where(scored, nll.double(), 0.0).sum(dim=-1).cpu()  # (B,)
        for chunk, s, n in zip(batch, nll, scored.sum(dim=-1).cpu(), strict=True):
            sums[chunk.sample] += float(s)
            counts[chunk.sample] += int(n)
        if progress is not None:
            progress.update(begin + len(batch), len(chunks), "scored chunks")
    return sums, counts, len(chunks), context_only


def generative_perplexity(
    samples: Sequence[str],
    model: Any,
    batch_size: int = 16,
    device: str | torch.device | None = None,
    max_length: int | None = None,
    reference: Sequence[str] | None = None,
    checkpoint: str = "(in memory)",
    samples_file: str | None = None,
    reference_file: str | None = None,
    progress: Progress | None = None,
    stride: int | None = None,
) -> GenPPLResult:
    """Score ``samples`` with ``model`` (an AR ``GenerativeModel``, e.g. from
    ``genodiff.checkpoints.load_model``) and measure their diversity (and that of
    ``reference`` when given); see the module doc. ``device`` moves the model there (default:
    where it is); ``max_length`` defaults to the checkpoint's ``data.max_length``, ``stride``
    to half of it."""
    if device is not None:
        model = model.to(device)
    return score_samples(
        samples,
        CheckpointScorer(model, checkpoint),
        batch_size=batch_size,
        max_length=max_length,
        reference=reference,
        samples_file=samples_file,
        reference_file=reference_file,
        progress=progress,
        stride=stride,
    )


def score_samples(
    samples: Sequence[str],
    scorer: SampleScorer,
    batch_size: int = 16,
    max_length: int | None = None,
    reference: Sequence[str] | None = None,
    samples_file: str | None = None,
    reference_file: str | None = None,
    progress: Progress | None = None,
    stride: int | None = None,
) -> GenPPLResult:
    """Gen PPL of ``samples`` under ``scorer`` (``genodiff.scorers``) and their diversity (and
    that of ``reference`` when given), on the scorer's ids; ``max_length`` defaults to the
    scorer's window, ``stride`` to half of ``max_length``."""
    check_scoring_options(batch_size, max_length, stride)
    if max_length is None:
        max_length = scorer.default_max_length
    if not samples:
        raise InputValueError("no sample to score")
    encoded = encode_samples(samples, scorer)
    stride = max(1, max_length // 2) if stride is None else stride
    sums, counts, chunks, context_only = score_chunks(
        scorer, encoded, max_length, stride, batch_size, progress
    )
    keep = counts > 0  # a sample of context-only tokens has no perplexity
    if not keep.any():
        raise InputValueError(
            "no sample holds a token the checkpoint scores (all are outside its "
            "tokenizer's sample_ids, e.g. all N)"
        )
    nll, se = ratio_and_se(sums[keep], counts[keep])
    per_sample = np.exp(sums[keep] / counts[keep])
    n = int(keep.sum())
    ref_diversity = None
    if reference is not None:
        ref_diversity = Diversity.of(
            reference_like(encode_samples(reference, scorer), encoded, scorer)
        )
    return GenPPLResult(
        checkpoint=scorer.name,
        objective=scorer.objective,
        scoring=scorer.scoring,
        samples_file=samples_file,
        samples=len(samples),
        tokens=int(counts.sum()),
        context_only_tokens=context_only,
        chunks=chunks,
        max_length=max_length,
        stride=stride,
        batch_size=batch_size,
        nll=nll,
        nll_se=se,
        gen_ppl=math.exp(nll),
        gen_ppl_se=None if se is None else math.exp(nll) * se,
        per_sample_ppl_mean=float(per_sample.mean()),
        per_sample_ppl_se=float(per_sample.std(ddof=1) / math.sqrt(n)) if n > 1 else None,
        diversity=Diversity.of(encoded),
        reference_file=reference_file,
        reference_diversity=ref_diversity,
    )


def default_ar_checkpoints(samples_path: str | os.PathLike) -> list[str]:
    """The AR checkpoints the domains name (``Domain.default_ar_checkpoints``) for samples in
    the file ``samples_path``: those of the domain that owns its format (FASTA: DNA) alone,
    else those of every domain."""
    owner = format_owner(samples_path)
    domains = registry.available("domain")
    chosen = [domains[owner]] if owner is not None else list(domains.values())
    return [path for domain in chosen for path in domain.default_ar_checkpoints]


def default_ar_checkpoint(samples_path: str | os.PathLike, root: str | os.PathLike = ".") -> Path:
    """The first of ``default_ar_checkpoints(samples_path)`` (under ``root``) that exists;
    first of all, an input error for a sample file that is not there (what the user meant to
    score is named before the checkpoint they did not give)."""
    check_sample_file(samples_path, "sample file", "samples")
    candidates = default_ar_checkpoints(samples_path)
    for candidate in candidates:
        path = Path(root) / candidate
        if path.is_file():
            return path
    raise InputFileNotFoundError(
        "no checkpoint given and none of the conventional AR checkpoints for these samples "
        f"exists ({', '.join(candidates) or 'none known'}); give an AR checkpoint (a path, or "
        "the name of an autoregressive model `genodiff models` lists), or train the AR run of "
        "one of them with `genodiff train` (outputs/NAME: the config NAME)",
        parameter="checkpoint",
    )


def check_scoring_options(
    batch_size: int, max_length: int | None, stride: int | None = None
) -> None:
    """InputValueError (naming the parameter) for a ``batch_size``, ``max_length`` or
    ``stride`` below 1, or a ``stride`` above ``max_length`` (the window, when given)."""
    if batch_size < 1:
        raise InputValueError(f"batch_size must be >= 1, got {batch_size}", parameter="batch_size")
    if max_length is not None and max_length < 1:
        raise InputValueError(f"max_length must be >= 1, got {max_length}", parameter="max_length")
    if stride is not None and stride < 1:
        raise InputValueError(f"stride must be >= 1, got {stride}", parameter="stride")
    if stride is not None and max_length is not None and stride > max_length:
        raise InputValueError(
            f"stride must be at most the window (max_length {max_length}), got {stride}",
            parameter=("stride", "max_length"),
        )


def _refuse_other_domains(
    paths: Sequence[str | os.PathLike | None], domain: str | None, scorer: str
) -> None:
    """InputValueError for a file in the own format of a domain other than ``domain`` (None:
    any domain)."""
    for path in paths:
        owner = None if path is None else format_owner(path)
        if domain is not None and owner not in (None, domain):
            raise InputValueError(
                f"{path} is in a {owner} sample format, but {scorer} scores {domain} samples; "
                f"score {owner} samples with a {owner} AR checkpoint",
                parameter="checkpoint",
            )


def score_sample_file(
    samples_path: str | os.PathLike,
    checkpoint: str | os.PathLike | None = None,
    reference_path: str | os.PathLike | None = None,
    batch_size: int = 16,
    device: str | None = None,
    max_length: int | None = None,
    progress: Progress | None = None,
    stride: int | None = None,
    scorer: str | None = None,
    scorer_model: str | None = None,
) -> GenPPLResult:
    """Gen PPL of the samples in a file, scored by the AR checkpoint at ``checkpoint``
    (loaded with its EMA weights) or, given ``scorer`` instead, by the scorer registered under
    that name (``genodiff.scorers.registered_scorer``) built with ``scorer_model`` (default: the
    scorer's ``default_model``), with the diversity of ``reference_path``; windows of
    ``max_length`` tokens (default: the scorer's) advance by ``stride`` (default: half the
    window)."""
    from genodiff.checkpoints import load_model
    from genodiff.devices import resolve_device

    if scorer is None and scorer_model is not None:
        raise InputValueError(
            f"scorer_model {scorer_model!r} names the model of a scorer; name the scorer too",
            parameter="scorer",
        )
    if (checkpoint is None) == (scorer is None):
        raise InputValueError(
            "score with one of a checkpoint and a scorer", parameter=("checkpoint", "scorer")
        )
    check_scoring_options(batch_size, max_length, stride)  # before anything is loaded
    torch_device = resolve_device(device)
    samples = read_samples(samples_path)
    reference = None
    if reference_path is not None:  # a folder, a FIFO: named as the reference, not a sample file
        reference = read_samples(check_sample_file(reference_path, "reference", "reference"))
    paths = (samples_path, reference_path)
    built: SampleScorer
    if scorer is not None:
        scorer_class = registered_scorer(scorer)
        model = scorer_model if scorer_model is not None else scorer_class.default_model
        if model is None:
            raise InputValueError(
                f"scorer {scorer!r} has no default model; name the model it loads",
                parameter="scorer_model",
            )
        _refuse_other_domains(paths, scorer_class.domain, f"the {scorer} scorer")  # before loading
        built = scorer_class(model, torch_device)
    else:
        built = CheckpointScorer(load_model(checkpoint, torch_device), str(checkpoint))
        _refuse_other_domains(paths, built.domain, f"the checkpoint {checkpoint}")
    return score_samples(
        samples,
        built,
        batch_size=batch_size,
        max_length=max_length,
        reference=reference,
        samples_file=str(samples_path),
        reference_file=None if reference_path is None else str(reference_path),
        progress=progress,
        stride=stride,
    )
