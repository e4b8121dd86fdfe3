"""Held-out likelihood of a checkpoint: per-token NELBO (or exact NLL), bits, perplexity.

Every model is scored on the same windows: the test split of the checkpoint's data config
(or every window of a file, ``--file``, read and windowed as the checkpoint's data module
reads a file of its domain: ``DataModule.file_dataset``), ``num_windows`` of them picked at evenly
spaced indices, and a SHA-256 of their names and token ids (as little-endian int32, so any
vocabulary size survives) is reported so two runs can prove they saw the same data.

Estimator. Window i has per-window NELBO S_i (nats, the mean over K noise draws of the
objective's per-sequence sum) and n_i scored tokens. The per-token NELBO is the ratio
R = sum S_i / sum n_i, its standard error over windows (delta method for a ratio)
SE(R) = sqrt(sum_i (S_i - R n_i)^2 / (N (N - 1))) / mean(n_i); perplexity = exp(R) with
SE(ppl) = exp(R) SE(R), bits per token = R / ln 2.

Noise. Each window draws its own noise (``genodiff.randomness.noise.Noise.per_window``), keyed
by ``seed`` and the SHA-256 of its token ids (``window_seed`` there; a label is no part of
the key); its k-th of K draws has a stream of its own seeded from that key and k. So
S_i is a function of (window i's tokens, seed, K) alone: the same under any batch size, in
any company and order of windows, when several processes share the batches (``--devices``:
each scores a block of batches, the main process gathers them, ``genodiff.parallel``), and for
``Model.score`` of the window as a sequence. Equal windows get equal numbers. The K draws ride
in one batch (the batch of B windows repeated K times); an objective with low-discrepancy
times (MDLM, SEDD, D3PM, UDLM, Plaid) gives the k-th draw of a window the time of
u_k = (U + k/K) mod 1, U drawn once for the window: one time in each K-th of [0, 1), so the
mean over its K draws keeps a low variance. Windows no longer share one lattice, so their
errors are independent, as the standard error over windows assumes.

A class-conditional checkpoint is scored twice on the same draws: ``nelbo`` with each window's
true label, a bound on -log p(x | y), and ``nelbo_unconditional`` with the null label, a bound
on -log p(x) that compares with an unconditional model's ``nelbo``. Windows without a label
(``--file``) are scored with the null label in both.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.utils.data import Dataset

from genodiff.conditioning import null_labels
from genodiff.data.base import NamedItemDataset
from genodiff.data.overlap import training_overlap
from genodiff.data.training_files import DATA_FILES_KEY, locate_data
from genodiff.errors import (
    InputFileNotFoundError,
    InputValueError,
    NonFiniteOutputError,
    UserInputWarning,
    require_regular_file,
)
from genodiff.generation_config import check_option
from genodiff.model import GenerativeModel
from genodiff.objectives import Objective
from genodiff.objectives.base import LIKELIHOOD_WORDS
from genodiff.parallel import Workers, launch_workers, process_settings, spread_asked
from genodiff.progress import Progress, ProgressLine
from genodiff.randomness.noise import Noise
from genodiff.trained_window import check_backbone_length, warn_scoring_beyond_trained_window
from genodiff.user_warnings import warn_user


@dataclass
class HeldoutWindows:
    """The windows to score: ``dataset`` items at ``indices``, described by ``source``."""

    dataset: NamedItemDataset
    indices: list[int]
    source: str

    def coordinates(self) -> list[str]:
        return [self.dataset.item_name(i) for i in self.indices]


# Above this share of the tokens read as the tokenizer's unknown token, a file is refused: the
# number would score the unknown token, not the text (a FASTA given to a text model, say).
MAX_UNKNOWN_FRACTION = 0.25

# The keys only a class-conditional checkpoint's result holds.
CONDITIONAL_KEYS = (
    "classes",
    "labelled",
    "nelbo_unconditional",
    "nelbo_unconditional_se",
    "perplexity_unconditional",
)


@dataclass
class EvalResult:
    """What ``genodiff eval`` reports (``to_dict`` is its JSON object)."""

    checkpoint: str
    objective: str
    likelihood: str  # "exact" (AR), "bound" or "upstream" (``Objective.likelihood``)
    scoring: str  # which tokens are scored, how [PAD] is treated (``Objective.scoring``)
    source: str
    length: int
    windows: int
    tokens: int
    t_samples: int
    seed: int
    batch_size: int
    nelbo: float  # nats per token
    nelbo_se: float | None
    bits_per_token: float
    bits_per_token_se: float | None
    perplexity: float
    perplexity_se: float | None
    windows_sha256: str
    # The share of the windows' tokens (all but [PAD], [MASK], [BOS], [EOS]) that are the
    # tokenizer's unknown token (``unknown_fraction``).
    unknown_fraction: float = 0.0
    per_window: list[dict[str, Any]] | None = field(default=None)
    # A file holding the checkpoint's training data (``genodiff.data.overlap``): whether any
    # scored window overlaps the train split (None: the data module cannot tell) and the share
    # of the scored windows that do; the test split and other files: False, None.
    overlaps_training_data: bool | None = False
    training_overlap_share: float | None = None
    warnings: list[str] = field(default_factory=list)
    # Class-conditional checkpoints only (see the module docstring).
    classes: list[str] | None = None
    # Whether the windows carried their true labels (the test split); a file's carry none, and
    # ``nelbo`` is then the null label's too.
    labelled: bool = True
    nelbo_unconditional: float | None = None
    nelbo_unconditional_se: float | None = None
    perplexity_unconditional: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if out["per_window"] is None:
            del out["per_window"]
        if self.classes is None:  # an unconditional model: no conditional keys at all
            for key in CONDITIONAL_KEYS:
                del out[key]
        return out

    def describe(self) -> str:
        def pm(se: float | None) -> str:
            return f" +- {se:.4f}" if se is not None else ""

        kind, what = LIKELIHOOD_WORDS[self.likelihood]
        draws = (  # an exact likelihood (AR) draws no noise: t_samples and seed mean nothing
            "exact, no noise draws"
            if self.likelihood == "exact"
            else f"{self.t_samples} noise draw(s)/window, seed {self.seed}"
        )
        rows = [
            ("checkpoint", self.checkpoint),
            ("objective", f"{self.objective} ({draws})"),
            ("windows", f"{self.windows} x {self.length} tokens from {self.source}"),
            ("tokens", f"{self.tokens} scored; windows sha256 {self.windows_sha256[:16]}"),
            ("scored", self.scoring),
            (
                kind,
                f"{self.nelbo:.4f}{pm(self.nelbo_se)} nats/token, "
                f"{self.bits_per_token:.4f}{pm(self.bits_per_token_se)} bits/token",
            ),
            ("perplexity", f"{self.perplexity:.4f}{pm(self.perplexity_se)} ({what})"),
        ]
        if self.unknown_fraction > 0:
            rows.append(
                (
                    "unknown",
                    f"{self.unknown_fraction:.1%} of the tokens are the tokenizer's unknown "
                    "token (text its vocabulary lacks): the number scores that token there",
                )
            )
        measure = "NLL" if self.likelihood == "exact" else "NELBO"
        if self.classes is not None and not self.labelled:  # a file: the null label's alone
            rows[5] = (f"{measure} p(x)", f"{rows[5][1]} ({kind}, null label: a file's windows "
                       "carry no label)")  # fmt: skip
            rows.append(("classes", ", ".join(self.classes)))
        elif self.classes is not None:  # the number given the true label, then the null label's
            rows[5] = (f"{measure} p(x|y)", f"{rows[5][1]} ({kind}, true label)")
            rows += [
                ("classes", ", ".join(self.classes)),
                (
                    f"{measure} p(x)",
                    f"{self.nelbo_unconditional:.4f}{pm(self.nelbo_unconditional_se)} "
                    f"nats/token (null label: compare with unconditional models), "
                    f"perplexity {self.perplexity_unconditional:.4f}",
                ),
            ]
        rows += [("warning", warning) for warning in self.warnings]
        return "\n".join(f"{label:<14}{value}" for label, value in rows)


def spread_indices(total: int, num_windows: int | None) -> list[int]:
    """``num_windows`` indices evenly spread over ``range(total)`` (all when None or more)."""
    if num_windows is not None and num_windows < 1:
        raise InputValueError(
            f"num_windows must be >= 1, got {num_windows}", parameter="num_windows"
        )
    if num_windows is None or num_windows >= total:
        return list(range(total))
    return [i * total // num_windows for i in range(num_windows)]


def heldout_windows(
    data_config: dict[str, Any],
    tokenizer: Any,
    data_file: str | os.PathLike | None = None,
    length: int | None = None,
    num_windows: int | None = None,
) -> HeldoutWindows:
    """The test split of ``data_config`` (its ``max_length`` replaced by ``length`` if given),
    or with ``data_file`` every ``length``-token window of that file, as the checkpoint's data
    module windows a file (DNA: non-overlapping windows tiling every record, mostly-N
    windows skipped, no reverse complement)."""
    from genodiff.data.build import build_datamodule
    from genodiff.domains import domain_of

    if length is None:
        length = data_config.get("max_length", 1024)
    elif length < 1:
        raise InputValueError(
            f"length must be >= 1 {tokenizer.unit}, got {length}", parameter="length"
        )
    datamodule = build_datamodule({**data_config, "max_length": length})
    datamodule.attach_tokenizer(tokenizer)
    readable = f"data file ({domain_of(tokenizer).eval_file})"
    if data_file is not None:
        require_regular_file(data_file, "data file", parameter="data_file")
        dataset = datamodule.file_dataset(data_file)
        source = str(Path(data_file).resolve())
        where = str(data_file)
    else:
        try:
            dataset = datamodule.heldout_dataset("test")
        except FileNotFoundError as err:
            raise InputFileNotFoundError(
                f"{err}. The checkpoint's test split needs its data; or score any {readable}",
                parameter="data_file",
            ) from None
        source = f"{data_config['name']} test split of {_data_source(data_config)}"
        where = "the test split of the checkpoint's data"
    if len(dataset) == 0:
        raise InputValueError(
            f"{where} has no {length}-{tokenizer.unit} window to score; pass a smaller length "
            f"or another {readable}",
            parameter=("length", "data_file"),
        )
    return HeldoutWindows(dataset, spread_indices(len(dataset), num_windows), source)


def unknown_fraction(windows: HeldoutWindows, tokenizer: Any, given_file: bool = True) -> float:
    """The share of the windows' tokens (all but [PAD], [MASK], [BOS] and [EOS]) that are
    ``tokenizer``'s unknown token (0 for a tokenizer without one); InputValueError above
    ``MAX_UNKNOWN_FRACTION``: the windows are not of the tokenizer's domain. ``given_file``:
    the windows are of a file the caller gave (the error names it as the parameter at fault),
    not of the run's own test split."""
    unknown_id = getattr(tokenizer, "unk_id", None)
    if unknown_id is None:
        return 0.0
    marks = [tokenizer.pad_id, tokenizer.mask_id, tokenizer.bos_id, tokenizer.eos_id]
    marks = torch.tensor([i for i in marks if i is not None])
    unknown = total = 0
    for index in windows.indices:
        ids = windows.dataset[index]["input_ids"]  # (L,)
        unknown += int((ids == unknown_id).sum())
        total += int((~torch.isin(ids, marks)).sum())
    fraction = unknown / max(total, 1)
    if fraction > MAX_UNKNOWN_FRACTION:
        token = tokenizer.decode([unknown_id])
        advice = "give a file of its domain" if given_file else "its data and tokenizer differ"
        raise InputValueError(
            f"{fraction:.0%} of the tokens of {windows.source} read as the unknown token {token}: "
            f"it is not {tokenizer.domain} data this model can score; {advice}",
            parameter="data_file" if given_file else None,
        )
    return fraction


def _data_source(data_config: dict[str, Any]) -> str:
    """The file a data config reads (its first ``data_file_keys`` entry set), for the report;
    of a key that maps names to files (``fasta_by_label``), each as ``name=PATH``."""
    from genodiff import registry

    for key in registry.get("data", data_config["name"]).data_file_keys:
        value = data_config.get(key)
        if isinstance(value, Mapping) and value:
            return ", ".join(f"{name}={path}" for name, path in value.items())
        if value:
            return str(value)
    return "the bundled demo data"


def window_digest(dataset: Dataset, indices: list[int], coordinates: list[str]) -> str:
    """SHA-256 over each window's name and token ids (little-endian int32): equal digests,
    equal data."""
    digest = hashlib.sha256()
    for index, where in zip(indices, coordinates, strict=True):
        digest.update(where.encode())
        digest.update(dataset[index]["input_ids"].numpy().astype("<i4").tobytes())
    return digest.hexdigest()


@torch.no_grad()
def score_windows(
    objective: Objective,
    backbone: nn.Module,
    dataset: NamedItemDataset,
    indices: list[int],
    t_samples: int,
    seed: int,
    batch_size: int,
    progress: ProgressLine | None = None,
    num_classes: int | None = None,
    batches: range | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Per window: (NELBO in nats averaged over ``t_samples`` draws (N,), scored tokens (N,),
    and for a model with ``num_classes`` classes the NELBO with the null label on the same
    draws (N,), else None).

    Batches of ``batch_size`` windows, each repeated ``t_samples`` times, each window drawing
    its own noise (``Noise.per_window``, see module doc): a window's numbers do not depend on
    ``batch_size`` or the other windows. ``batches`` (default: all) says which batches of the
    list to score: the arrays then hold those batches' windows, in order. A conditional model
    scores ``nelbo`` with each item's ``labels`` (the null label when the dataset's items
    carry none), then the null label on the same draws.
    A window whose NELBO is NaN or infinite stops the scoring (``NonFiniteOutputError``): the
    model's outputs are not finite, and no average over windows could mean anything.
    """
    if t_samples < 1 or batch_size < 1:
        raise InputValueError(
            f"need t_samples >= 1 and batch_size >= 1, got {t_samples}, {batch_size}"
        )
    device = next(backbone.parameters()).device
    backbone.eval()
    objective.eval()  # training-only terms (D3PM's auxiliary CE) stay out of the score
    nelbo, tokens, unconditional = [], [], []

    def per_window(sums: Tensor) -> Tensor:  # (K B,) -> (B,): the mean over the K draws
        return sums.double().view(t_samples, -1).mean(dim=0).cpu()

    def check_finite(sums: Tensor, chunk: list[int]) -> None:  # sums (K B,)
        finite = torch.isfinite(sums.view(t_samples, len(chunk))).all(dim=0).cpu()  # (B,)
        if not finite.all():
            window = dataset.item_name(chunk[int((~finite).nonzero()[0])])
            raise NonFiniteOutputError(
                f"the NELBO of window {window} is not finite (NaN or inf): the network's "
                "output overflowed, or the run diverged or its weights are damaged; use "
                "another checkpoint, e.g. the previous one"
            )

    def window_noise(windows: Tensor) -> Noise:  # windows (B, L): K B rows' streams, fresh
        return Noise.per_window(seed, windows, t_samples, device)

    batches = range(math.ceil(len(indices) / batch_size)) if batches is None else batches
    total = sum(len(indices[b * batch_size : (b + 1) * batch_size]) for b in batches)
    done = 0
    for batch in batches:
        chunk = indices[batch * batch_size : (batch + 1) * batch_size]
        done += len(chunk)
        items = [dataset[i] for i in chunk]
        windows = torch.stack([item["input_ids"] for item in items])  # (B, L)
        ids = windows.to(device).repeat(t_samples, 1)  # (K B, L)
        if num_classes is None:
            sums, counts = objective.loss(backbone, ids, window_noise(windows))  # (K B,) each
        else:
            null = null_labels(ids.shape[0], num_classes, device)  # (K B,)
            labels = null
            if all("labels" in item for item in items):
                labels = torch.stack([item["labels"] for item in items]).to(device)
                labels = labels.repeat(t_samples)  # (K B,)
            sums, counts = objective.loss(backbone, ids, window_noise(windows), labels=labels)
            # the same draws for p(x): the streams again from their start
            sums_null, _ = objective.loss(backbone, ids, window_noise(windows), labels=null)
            check_finite(sums_null, chunk)
            unconditional.append(per_window(sums_null))
        check_finite(sums, chunk)
        nelbo.append(per_window(sums))
        tokens.append(counts.view(t_samples, len(chunk))[0].cpu())  # (B,)
        if progress is not None:
            progress.update(done, total, "scored windows")
    if not nelbo:  # no batch to score here (a process without a share)
        empty = np.zeros(0)
        return empty, np.zeros(0, dtype=np.int64), empty if num_classes is not None else None
    null_nelbo = torch.cat(unconditional).numpy() if unconditional else None
    return torch.cat(nelbo).numpy(), torch.cat(tokens).numpy(), null_nelbo


def ratio_and_se(sums: np.ndarray, counts: np.ndarray) -> tuple[float, float | None]:
    """R = sum(sums) / sum(counts) and its delta-method standard error over windows (None
    for fewer than two windows)."""
    total = counts.sum()
    if total == 0:
        raise InputValueError("the held-out windows hold no scored token (all N?)")
    ratio = float(sums.sum() / total)
    n = len(sums)
    if n < 2:
        return ratio, None
    residual = sums - ratio * counts
    se = math.sqrt(float((residual**2).sum()) / (n * (n - 1))) / float(counts.mean())
    return ratio, se


def paired_difference(
    report: Mapping[str, Any], other: Mapping[str, Any]
) -> tuple[float, float | None]:
    """``report``'s per-token NELBO less ``other``'s (nats per token) and the standard error of
    that difference over windows, from two ``genodiff eval --json --per-window`` reports (or
    ``EvalResult.to_dict()``) of the same windows: the ratio of the per-window differences
    over the tokens (``ratio_and_se``), whose error leaves out what the windows share, so it
    can be many times smaller than the two reports' errors combined. InputValueError when the
    reports lack ``per_window`` or scored other windows or tokens."""
    named = {"the first report": report, "the second report": other}
    for name, given in named.items():
        if not given.get("per_window"):
            raise InputValueError(
                f"{name} holds no per-window NELBOs (per_window): evaluate with per_window=True"
            )
    if report.get("windows_sha256") != other.get("windows_sha256"):
        raise InputValueError(
            "the reports scored other windows (their windows_sha256 differ): score both "
            "models on the same data and number of windows"
        )
    first, second = report["per_window"], other["per_window"]
    tokens = np.array([window["tokens"] for window in first], dtype=np.float64)
    if [w["tokens"] for w in second] != tokens.tolist():
        raise InputValueError(
            "the reports scored other tokens of the same windows (e.g. an AR model's first "
            "token is not scored): their per-token NELBOs do not pair window by window"
        )
    differences = np.array(  # (N,) nats per window
        [a["nelbo"] - b["nelbo"] for a, b in zip(first, second, strict=True)]
    )
    return ratio_and_se(differences, tokens)


def noise_draws(objective: Objective, t_samples: int | None) -> int:
    """The noise draws each window is scored with: ``t_samples``, or where none is given the
    objective's ``eval_t_samples``. An exact likelihood (AR) draws no noise and is scored in
    one pass: a ``t_samples`` given for it is said to be ignored. InputValueError unless
    ``t_samples`` is None or a whole number >= 1."""
    if t_samples is None:
        return objective.eval_t_samples
    # a NumPy integer is the int it equals, as seed's and batch_size's (check_option)
    whole = isinstance(t_samples, numbers.Integral) and not isinstance(t_samples, bool)
    if not whole or t_samples < 1:
        raise InputValueError(
            f"t_samples must be an integer >= 1, got {t_samples!r}", parameter="t_samples"
        )
    t_samples = int(t_samples)
    if objective.exact_likelihood and t_samples != objective.eval_t_samples:
        message = (
            f"t_samples={t_samples} is ignored: this model's likelihood is exact "
            "(next-token prediction scores a window in one pass, with no noise to draw)"
        )
        warn_user(UserInputWarning(message, parameter="t_samples"))
    return objective.eval_t_samples if objective.exact_likelihood else t_samples


def score_sequences(
    model: GenerativeModel,
    sequences: Sequence[str],
    t_samples: int | None = None,
    seed: int = 0,
    batch_size: int = 16,
) -> list[float]:
    """Each of ``sequences``' per-token NELBO (AR: NLL) in nats under ``model``'s averaged
    weights: each sequence is one window, read by the run's data module as it reads a window
    of a file (``DataModule.sequences_dataset``) and scored as ``genodiff eval --file`` scores
    one (``score_windows``; a class-conditional model with the null label, p(x)). Sequences
    of one length are batched together in their order; each draws its own noise, keyed by
    ``seed`` and its tokens, so its score is a function of (its tokens, ``seed``,
    ``t_samples``) alone (a time-conditioned network's up to the last bits of its per-row
    time embedding): the same alone or among others, under any ``batch_size``, and the
    number ``eval --file --per-window`` gives it as a window of a file. ``t_samples``: noise
    draws per sequence (default: the objective's)."""
    from genodiff.data.build import build_datamodule

    objective, backbone = model.eval_objective, model.eval_backbone
    t_samples = noise_draws(objective, t_samples)  # refused even for no sequences, as seed is
    if not sequences:
        return []
    datamodule = build_datamodule(model.config["data"])
    datamodule.attach_tokenizer(model.tokenizer)
    dataset = datamodule.sequences_dataset(sequences)
    groups: dict[int, list[int]] = {}  # item length -> indices, in order
    for index in range(len(dataset)):
        try:
            item = dataset[index]
        except InputValueError as err:  # a letter the tokenizer cannot read: which sequence
            raise InputValueError(f"sequence {index}: {err}", parameter="sequences") from None
        groups.setdefault(len(item["input_ids"]), []).append(index)
    scores = [math.nan] * len(dataset)
    if 0 in groups:  # a window of no token: nothing to run the network on
        raise InputValueError(
            f"sequence {groups[0][0]} has no token to score (empty)", parameter="sequences"
        )
    longest = groups[max(groups)][0]  # the first of the longest sequences
    check_backbone_length(backbone, max(groups), f"len(sequences[{longest}])")
    warn_scoring_beyond_trained_window(model.config, max(groups), model.tokenizer.unit)
    for indices in groups.values():
        sums, counts, _ = score_windows(
            objective, backbone, dataset, indices, t_samples, seed, batch_size
        )
        for index, total, count in zip(indices, sums, counts, strict=True):
            if count == 0:
                raise InputValueError(
                    f"sequence {index} has no token to score (all N, or empty)",
                    parameter="sequences",
                )
            scores[index] = float(total / count)
    return scores


def set_eval_t_power(objective: Objective, power: float, checkpoint: Path) -> None:
    """Set the power of ``objective``'s importance-weighted held-out times (UDLM's
    ``eval_t_power``), checked against the range its class declares, as in a config; one
    InputValueError for an objective that has no such power."""
    from genodiff.config_values import check_value, class_spec

    key = class_spec(type(objective)).keys.get("eval_t_power")
    if key is None:
        raise InputValueError(
            f"{checkpoint} holds a model of objective {type(objective).__name__}, whose "
            "held-out times take no power; eval_t_power applies to UDLM's importance-weighted "
            "times",
            parameter="eval_t_power",
        )
    check_value("objective.eval_t_power", power, key)
    objective.eval_t_power = float(power)


def evaluate_checkpoint(
    checkpoint: str | os.PathLike,
    data_file: str | os.PathLike | None = None,
    length: int | None = None,
    num_windows: int | None = None,
    t_samples: int | None = None,
    seed: int = 0,
    batch_size: int = 16,
    device: str | None = None,
    per_window: bool = False,
    progress: Progress | None = None,
    accelerator: str | None = None,
    devices: int | None = None,
    num_nodes: int | None = None,
    eval_t_power: float | None = None,
    data_files: Mapping[str, Any] | None = None,
) -> EvalResult | None:
    """Load a ``genodiff train`` checkpoint and score held-out windows with its EMA weights.

    ``t_samples`` defaults to the objective's ``eval_t_samples`` (AR: always 1).
    ``data_files``: copies of the run's data files for its test split, by ``data:`` key as
    ``Model.windows`` takes them (``{"fasta": PATH}``, ``{"fasta_by_label": {"human": PATH}}``),
    each checked against the content sha256 the model recorded: a shipped model's files that
    genodiff does not ship (``genodiff eval --data KEY=PATH``).
    ``eval_t_power`` replaces the checkpoint's for an objective that draws its held-out times
    importance-weighted (UDLM: t = s^power; 1 = uniform t).
    ``devices`` / ``num_nodes`` (with ``accelerator``, as Lightning's; ``accelerator`` alone is
    refused): that many processes each score a block of the batches (``genodiff.parallel``),
    with the numbers one process gives; the main process returns the result, the others None.
    """
    from genodiff.checkpoints import load_model
    from genodiff.devices import resolve_device

    seed, batch_size = check_option("seed", seed), check_option("batch_size", batch_size)
    spread = spread_asked(accelerator, devices, num_nodes)
    checkpoint = Path(checkpoint)
    torch_device = resolve_device(device)
    model = load_model(checkpoint, torch_device)
    objective, backbone = model.eval_objective, model.eval_backbone
    check_backbone_length(backbone, length, "length")  # before a data file is read or indexed
    if eval_t_power is not None:
        set_eval_t_power(objective, eval_t_power, checkpoint)
    t_samples = noise_draws(objective, t_samples)
    data = model.config["data"]
    if data_file is not None and data_files:
        raise InputValueError(
            "data_files are copies of the run's own data files, for its test split, and "
            "data_file a file to score instead: give one or the other",
            parameter=("data_files", "data_file"),
        )
    if data_file is None:  # the run's test split: its files where they are on this machine
        copy_form = "{option}=PATH (data_files)"
        point = f"then give a copy of it as {copy_form}, or a file of your own to score "
        point += "instead (data_file)"
        records = model.provenance.get(DATA_FILES_KEY)
        try:
            data = locate_data(data, records, data_files, point=point, copy_form=copy_form)
        except InputFileNotFoundError as err:
            # A file nowhere here: ``point`` names both fixes; a copy given that is not there:
            # the path given in data_files alone (data_file would not mend it).
            said = str(err)
            fixes = ("data_files", "data_file") if "(data_file)" in said else ("data_files",)
            raise InputFileNotFoundError(said, parameter=fixes) from None
    windows = heldout_windows(data, model.tokenizer, data_file, length, num_windows)
    length = windows.dataset.max_length
    warn_scoring_beyond_trained_window(model.config, length, model.tokenizer.unit, windows=True)
    overlap = None  # the test split, or a file that holds no training data
    if data_file is not None:
        digest, records = model.provenance.get("data_digest"), model.provenance.get(DATA_FILES_KEY)
        args = (digest, data_file, windows.dataset, windows.indices, records)
        overlap = training_overlap(model.config["data"], model.tokenizer, *args)
    unknown = unknown_fraction(windows, model.tokenizer, given_file=data_file is not None)
    coordinates = windows.coordinates()
    classes = model.class_names
    workers = Workers()
    if spread:
        workers = launch_workers(process_settings(accelerator, devices, num_nodes))
        model.to(workers.device)
    batches = workers.block(math.ceil(len(windows.indices) / max(batch_size, 1)))
    try:
        scored = score_windows(
            objective,
            backbone,
            windows.dataset,
            windows.indices,
            t_samples,
            seed,
            batch_size,
            _share_progress(progress, workers),
            None if classes is None else len(classes),
            batches,
        )
    except InputValueError as err:
        raise InputValueError(f"while scoring {length}-token windows: {err}") from None
    except NonFiniteOutputError as err:
        raise NonFiniteOutputError(f"{checkpoint}: {err}") from None
    shares = workers.gather(scored)  # every process's windows, in order
    if not workers.main:
        return None
    sums, counts = (np.concatenate([share[i] for share in shares]) for i in (0, 1))
    sums_null = None if classes is None else np.concatenate([share[2] for share in shares])
    nelbo, se = ratio_and_se(sums, counts)
    null_nelbo, null_se = ratio_and_se(sums_null, counts) if sums_null is not None else (None, None)
    ln2 = math.log(2)
    return EvalResult(
        checkpoint=str(checkpoint),
        objective=model.config["objective"]["name"],
        likelihood=objective.likelihood,
        scoring=objective.scoring,
        source=windows.source,
        length=length,
        windows=len(windows.indices),
        tokens=int(counts.sum()),
        t_samples=t_samples,
        seed=seed,
        batch_size=batch_size,
        nelbo=nelbo,
        nelbo_se=se,
        bits_per_token=nelbo / ln2,
        bits_per_token_se=None if se is None else se / ln2,
        perplexity=math.exp(nelbo),
        perplexity_se=None if se is None else math.exp(nelbo) * se,
        windows_sha256=window_digest(windows.dataset, windows.indices, coordinates),
        unknown_fraction=unknown,
        overlaps_training_data=False if overlap is None else overlap.overlaps,
        training_overlap_share=None if overlap is None else overlap.share,
        warnings=[] if overlap is None or overlap.overlaps is False else [overlap.warning()],
        per_window=[
            {
                "window": where,
                "nelbo": float(s),
                "tokens": int(n),
                **({} if sums_null is None else {"nelbo_unconditional": float(sums_null[i])}),
            }
            for i, (where, s, n) in enumerate(zip(coordinates, sums, counts, strict=True))
        ]
        if per_window
        else None,
        classes=classes,
        labelled=data_file is None,
        nelbo_unconditional=null_nelbo,
        nelbo_unconditional_se=null_se,
        perplexity_unconditional=None if null_nelbo is None else math.exp(null_nelbo),
    )


class _MainShareProgress:
    """The progress line of the main process of a multi-process ``evaluate_checkpoint``: its
    own share of the windows, said to be that (the other processes score theirs at the same
    pace; no process waits for another to be counted)."""

    def __init__(self, bar: Progress, processes: int) -> None:
        self.bar, self.processes = bar, processes

    def update(self, done: float, total: float | None, what: str) -> None:
        self.bar.update(done, total, what, extra=f"the main process's share of {self.processes}")


def _share_progress(progress: Progress | None, workers: Workers) -> ProgressLine | None:
    """Where this process's scoring reports: ``progress`` in one process; its main process's
    share, so labelled, in several; nowhere in the other processes."""
    if progress is None or not workers.main:
        return None
    return progress if workers.world_size == 1 else _MainShareProgress(progress, workers.world_size)
