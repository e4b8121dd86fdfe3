"""Guided sampling: drawing DNA of a chosen class (Schiff et al. 2025, docs/architecture.md §3.6).

A request with a ``guidance`` (``SampleRequest.guidance``, a ``Guidance``: the class id of a
class-conditional model's class, gamma, its schedule, an optional classifier and the form) is
guided in one of two ways, both a log-linear combination of K network-side parts,

    log m = sum_k w_k(gamma) * part_k,

- D-CFG (classifier-free): parts (log x_theta(z_t, y), log x_theta(z_t, null)), weights
  (gamma, 1 - gamma). gamma = 0 is p(x), 1 the conditional model p(x | y), > 1 extrapolation.
  A constant gamma of 0 or 1 needs one network part (K = 1), anything else two, computed in
  one network call on a doubled batch (label and null label) when the backbone records its
  number of classes.
- D-CBG (classifier-based): parts (log x_theta(z_t, null), tilt), weights (1, gamma), the tilt
  (n, L, V) being log p(y | z_t with position l set to v) - log p(y | z_t) from a classifier on
  noisy inputs (``NoisyClassifierGuide.tilt``).

**Two forms for masked diffusion** (``Guidance.form``, ``GUIDANCE_FORMS``). A step t -> s of a
masked position has V + 1 outcomes: a letter v, with q(v) = x(v) (p_t - p_s) / p_t, or staying
masked, q([MASK]) = p_s / p_t (p = the mask probability).

- ``"x0"`` normalises m over the letters, x~ = softmax(log m) (``Guide.combine``), and steps
  with the ordinary posterior of x~: the unmasking rate is the unguided one and only the value
  of an unmasking position is guided. D-CFG in this form is the reference code's
  (kuleshov-group/discrete-diffusion-guidance), the default for D-CFG.
- ``"transition"`` is the paper's (and the reference code's D-CBG, ``_cbg_denoise``): the
  guided transition is normalised over all V + 1 outcomes. D-CFG:
  q~ ∝ q(. | z_t, y)^gamma q(. | z_t, null)^(1 - gamma); D-CBG:
  q~(v) ∝ q(v | z_t) p(y | z_t with l set to v)^gamma, the [MASK] column's classifier term
  being p(y | z_t) itself (tilt 0). In both, [MASK] keeps p_s / p_t (the weights of D-CFG sum
  to 1) and a letter gets (p_t - p_s) / p_t * m(v), so the step is: stay masked with odds
  p_s : (p_t - p_s) Z, Z = sum_v m(v) (``Guide.log_rate_factor``), else take a value from
  x~. The value law is the x0 form's; guidance also changes how fast positions unmask (Z > 1
  unmasks sooner). The default for D-CBG.

With the exact classifier p(y | z_t), the exact denoiser and gamma = 1, Z = 1 and the forms
agree (p(x | y)); for any other gamma, or a classifier that is not the exact posterior of the
denoiser's law, they are different samplers, and so is D-CFG for gamma not in {0, 1}: the
forms have different continuous-time limits, so the total variation between their sample laws
does not vanish as the steps grow (tests/test_guidance_forms.py computes both laws exactly).

**Transition level (UDLM).** Under uniform noise every letter may change at every step, and
the reverse step is not "draw from x0": UDLM's only form is the transition form. The sampler
passes ``Guide.parts`` a ``transform`` that turns each network part log x_theta into
log q(z_s | z_t, x_theta) (the exact posterior), so that D-CFG is
log q~ = gamma log q(z_s | z_t, x_theta(y)) + (1 - gamma) log q(z_s | z_t, x_theta(null)) and
D-CBG log q(z_s | z_t, x_theta) + gamma * tilt, each renormalised per position (the paper's
forms). The tilt over vocabulary ids is read at the network's ``columns`` (the alphabet).
SEDD's D-CFG tempers concrete scores (``Guide.combine_scores``), the x0 form; AR's next-token
step has no staying outcome, so there the two forms are one.

**Time and the classifier.** ``tilt`` is given the time t (n,) of z_t. genodiff's noisy
classifiers have no time input (as the reference's) and do not read it: under masking the
exact p(y | z_t) does not depend on t (the mask says which letters are unknown, whatever the
time), so nothing is lost, and the cached masked sampler may keep a tilt across steps. Under
uniform noise the exact p(y | z_t, t) does depend on t (how far a letter is to be trusted);
a time-free classifier learns its average over the training times, an approximation. A
classifier that reads t (the tests' enumerated p(y | z_t, t)) makes D-CBG exact as dt -> 0.

The split matters: ``Guide.parts`` is the network side (what a cached sampler may keep while a
sequence is unchanged: the classifier has no time input either), ``Guide.combine`` and
``Guide.log_rate_factor`` the per-step side (gamma(t) changes with the time under a ramp
schedule), so the cached sampler stays exact in both forms. Temperature and top-p then reshape
the guided value law x~ as they reshape an unguided one, in both forms; whether a position
unmasks in a step is never tempered (UDLM: each x_theta is reshaped before its posterior).
Autoregressive models use the same combine on next-token distributions (CFG; FUDGE with
``NoisyClassifierGuide.next_token_scores`` as the second part).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor, nn

from genodiff import registry
from genodiff.backbones.build import CONFIG_ATTR
from genodiff.backbones.capabilities import capabilities_of
from genodiff.conditioning import null_label
from genodiff.errors import InputValueError, did_you_mean
from genodiff.generation_config import (  # the choices, declared with the options
    CLASSIFIER_FORMS,
    GUIDANCE_FORMS,
    GUIDANCE_SCHEDULES,
    MAX_GUIDANCE,
)

# (x (B, L) ids, t (B,) times, labels (B,) or None = the null label) -> (B, L, V) log-probs
Network = Callable[[Tensor, Tensor, "Tensor | None"], Tensor]


@runtime_checkable
class NoisyClassifierGuide(Protocol):
    """A classifier that guides sampling towards a class (D-CBG for masked diffusion, FUDGE
    for AR). ``genodiff.classifiers.load_classifier`` returns one."""

    class_names: list[str]
    tokenizer_name: str  # checked against the generator's tokenizer
    source: str  # where it was loaded from (its checkpoint), for the samples' provenance

    def tilt(
        self, x: Tensor, label: int, where: Tensor, exact: bool, t: Tensor | None = None
    ) -> Tensor:
        """x (n, L) ids (the state z_t: masked diffusion, [MASK] at unrevealed positions; UDLM,
        letters), where (n, L) bool: the positions to tilt (masked, not user-given; UDLM: every
        free position), t (n,) the time of z_t (None: not known; module doc, "Time and the
        classifier"). Returns (n, L, V) float32:
        log p(y=label | x with position l set to v) - log p(y=label | x) at the ``where``
        positions, 0 elsewhere. exact=True: one classifier call per (l, v) (batched);
        exact=False: the first-order form, g[l, v] - g[l, x_l], g = d log p(y|x) / d onehot(x)
        from one forward + one backward pass."""
        ...

    def next_token_scores(self, prefix: Tensor, candidates: Tensor, label: int) -> Tensor:
        """FUDGE for AR: prefix (n, i) ids (what the AR model has read, BOS excluded),
        candidates (K,) ids -> (n, K) float32 log p(y=label | prefix + candidate)."""
        ...


@dataclass(frozen=True)
class Guidance:
    """Guided sampling towards one class: the value a ``SampleRequest`` carries and a sample
    file's provenance records (``SamplingRun.guidance``).

    ``label`` is a class id of the model's classes (or of the classifier's, for an
    unconditional model), ``label_name`` its name (provenance; default: the id). ``gamma`` is
    the strength in the paper's convention (0 = unconditional, 1 = the conditional model, > 1
    extrapolation), ``schedule`` "constant" or "ramp" (gamma rising from 0 as sampling
    proceeds). ``classifier`` guides through a noisy classifier (D-CBG; FUDGE for AR) instead of
    the model's own null label (D-CFG), in ``classifier_form`` "first-order" or "exact".
    ``form`` is how a diffusion step weighs the guidance (``GUIDANCE_FORMS``, module doc); None
    is the kind's ``default_form``, which the sampler's table settles (``Sampler.resolved``:
    UDLM draws the transition form only, SEDD the x0 form only).
    InputValueError (naming the field) for settings that make no sense whatever the model.
    """

    label: int
    gamma: float = 1.0
    schedule: str = "constant"
    classifier: NoisyClassifierGuide | None = field(default=None, compare=False, repr=False)
    classifier_form: str = "first-order"
    label_name: str | None = None
    form: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.label, bool) or not isinstance(self.label, int) or self.label < 0:
            raise InputValueError(
                f"label must be a class id >= 0, got {self.label!r}", parameter="label"
            )
        if not math.isfinite(self.gamma) or not 0.0 <= self.gamma <= MAX_GUIDANCE:
            raise InputValueError(
                f"guidance gamma must be a number in [0, {MAX_GUIDANCE:g}] (0 = unconditional, "
                "1 = the conditional model, > 1 extrapolates, useful values are about 1-5; "
                f"above {MAX_GUIDANCE:g} is absurd, a point mass), got {self.gamma}",
                parameter="guidance",
            )
        if self.schedule not in GUIDANCE_SCHEDULES:
            raise InputValueError(
                f"unknown guidance schedule {self.schedule!r}; choose one of: "
                f"{', '.join(GUIDANCE_SCHEDULES)}",
                parameter="guidance_schedule",
            )
        if self.classifier_form not in CLASSIFIER_FORMS:
            raise InputValueError(
                f"unknown classifier form {self.classifier_form!r}; choose one of: "
                f"{', '.join(CLASSIFIER_FORMS)}",
                parameter="classifier_form",
            )
        if self.form is not None and self.form not in GUIDANCE_FORMS:
            raise InputValueError(
                f"unknown guidance form {self.form!r}; choose one of: {', '.join(GUIDANCE_FORMS)}",
                parameter="guidance_form",
            )

    @property
    def default_form(self) -> str:
        """The form a guidance of this kind takes unless told: "x0" for D-CFG (the reference
        code's), "transition" for D-CBG (the paper's)."""
        return "x0" if self.classifier is None else "transition"

    @property
    def name(self) -> str:
        """The class name the provenance records."""
        return self.label_name if self.label_name is not None else str(self.label)

    def provenance(self) -> dict[str, str | float]:
        """The fields a sample file records: label, guidance (gamma), guidance_schedule, the
        guidance_form its sampler drew (once ``Sampler.resolved`` set it), and with a
        classifier its checkpoint and form."""
        fields: dict[str, str | float] = {
            "label": self.name,
            "guidance": self.gamma,
            "guidance_schedule": self.schedule,
        }
        if self.form is not None:
            fields["guidance_form"] = self.form
        if self.classifier is not None:
            fields["classifier"] = str(getattr(self.classifier, "source", "(in memory)"))
            fields["classifier_form"] = self.classifier_form
        return fields


def gamma_at(guidance: float, schedule: str, progress: Tensor) -> Tensor:
    """gamma at ``progress`` in [0, 1] (any shape, float64): how far sampling has come
    (masked diffusion: 1 - t; AR: (i + 1) / L). "constant": gamma; "ramp": gamma * progress."""
    if schedule == "ramp":
        return guidance * progress
    return torch.full_like(progress, guidance)


class Guide:
    """How one request's guided prediction is made from a network (and a classifier).

    ``parts`` calls ``network`` (once or twice, with the labels of ``calls``) and the
    classifier: (B, L, K, V); ``combine`` weighs the K parts with gamma and renormalises. A
    sampler that calls its network in its own way (AR: a recurrent cache per call) passes no
    ``network`` and makes the parts itself from ``calls``. A masked-diffusion sampler also asks
    ``log_rate_factor`` how the guidance form changes a position's odds of unmasking
    (``changes_rates``: whether it does), reading ``guidance.form`` as ``Objective.sample`` set
    it (``Sampler.resolved``). The constructor refuses a label for a model without
    ``class_conditioning`` and, with ``allow_classifier=False``, a classifier (a sampler that
    offers D-CFG only); ``sampler`` names it in that message."""

    def __init__(
        self,
        guidance: Guidance | None,
        model: nn.Module,
        network: Network | None,
        sampler: str,
        allow_classifier: bool = True,
        columns: Tensor | None = None,
    ) -> None:
        self.network = network
        self.columns = columns
        self.classifier: NoisyClassifierGuide | None = None
        self.changes_rates = False  # (module doc: the transition form with two parts)
        if guidance is None:
            self.kind = "none"
            return
        self.label = guidance.label
        self.guidance = float(guidance.gamma)
        self.schedule = guidance.schedule
        self.classifier = guidance.classifier
        self.exact = guidance.classifier_form == "exact"
        if self.classifier is not None:
            if not allow_classifier:
                raise InputValueError(
                    f"{sampler} offers classifier-free guidance only (a label with a gamma); "
                    "classifier guidance is for MDLM/D3PM/UDLM (D-CBG) and AR models (FUDGE)",
                    parameter="classifier",
                )
            self.kind = "classifier"
            self.changes_rates = guidance.form == "transition"
            return
        if not capabilities_of(model).class_conditioning:
            raise InputValueError(
                "a label needs a class-conditional model (trained on labelled data, "
                "data.name=labelled); this one is unconditional. Guide it with a classifier "
                "instead (a classifier checkpoint and a label)",
                parameter="label",
            )
        constant = self.schedule == "constant"
        self.kind = {1.0: "conditional", 0.0: "null"}.get(self.guidance) if constant else None
        self.kind = self.kind or "free"
        # The null label's id (genodiff.conditioning.null_label), when the backbone records its
        # number of classes: D-CFG's two parts then come from one network call.
        self.null = getattr(model, CONFIG_ATTR, {}).get("num_classes")
        if self.null is not None and self.label >= self.null:
            raise InputValueError(
                f"label {self.label} is not a class id of this model, whose {self.null} classes "
                f"are 0..{self.null - 1} ({null_label(self.null)} is the null label, p(x): "
                "sample without a label, or with gamma 0, for it)",
                parameter="label",
            )
        self.changes_rates = self.kind == "free" and guidance.form == "transition"

    def calls(self, batch: int, device: torch.device) -> list[Tensor | None]:
        """The labels (batch,) of the network calls the guided prediction needs, in the order
        of its parts (None: the null label, or the plain call of an unconditional model)."""
        if self.kind in ("conditional", "free"):
            labels = torch.full((batch,), self.label, dtype=torch.long, device=device)
            return [labels, None] if self.kind == "free" else [labels]
        return [None]  # p(x); a classifier, if any, brings the class

    def parts(
        self,
        x: Tensor,
        t: Tensor,
        where: Tensor,
        transform: Callable[[Tensor], Tensor] | None = None,
    ) -> Tensor:
        """The network side of the guided prediction at ``x`` (B, L), times ``t`` (B,):
        (B, L, K, V). ``where`` (B, L) bool: the positions a classifier tilts. ``transform``
        maps the network parts (B, L, K', V) before the tilt joins them (UDLM: log x_theta to
        log q(z_s | z_t, x_theta), the module doc's transition level)."""
        calls = self.calls(len(x), x.device)
        if len(calls) == 2 and self.null is not None:  # D-CFG: (label, null) in one call
            labels = torch.cat([calls[0], torch.full_like(calls[0], null_label(self.null))])
            outputs = self.network(x.repeat(2, 1), t.repeat(2), labels).chunk(2)
        else:
            outputs = [self.network(x, t, labels) for labels in calls]
        # one part (unguided or one label): a view, no copy on the hot path
        parts = outputs[0].unsqueeze(-2) if len(outputs) == 1 else torch.stack(outputs, dim=-2)
        if transform is not None:
            parts = transform(parts)
        if self.classifier is None:
            return parts
        with torch.enable_grad():  # the first-order form differentiates the classifier
            tilt = self.classifier.tilt(x, self.label, where, self.exact, t)  # (B, L, V')
        if self.columns is not None:
            tilt = tilt[..., self.columns.to(tilt.device)]  # (B, L, N)
        else:
            tilt = _widen(tilt, parts.shape[-1])
        return torch.cat([parts, tilt.to(parts)[..., None, :]], dim=-2)

    def gamma(self, progress: Tensor) -> Tensor:
        """gamma(t) at ``progress`` (any shape; see ``gamma_at``)."""
        return gamma_at(self.guidance, self.schedule, progress.double())

    def weights(self, gamma: Tensor) -> Tensor:
        """(..., K) weights of the parts for gamma (...)."""
        if self.kind == "free":
            return torch.stack((gamma, 1.0 - gamma), dim=-1)
        return torch.stack((torch.ones_like(gamma), gamma), dim=-1)

    def combine(self, parts: Tensor, progress: Tensor) -> Tensor:
        """The guided log-probabilities (..., V) from ``parts`` (..., K, V) at ``progress``
        (broadcastable to ``parts.shape[:-2]``: 1 - t, or (i + 1) / L for AR). One part is
        returned as it is (an unguided sample is drawn exactly as before guidance existed)."""
        if parts.shape[-2] == 1:
            return parts[..., 0, :]
        return self.mix(parts, progress).log_softmax(dim=-1)

    def log_rate_factor(self, parts: Tensor, progress: Tensor) -> Tensor:
        """log Z (...,) for ``parts`` (..., K, V): the transition form's Z = sum_v m(v),
        log m = sum_k w_k part_k, by which guidance multiplies a masked position's odds of
        unmasking in a step (the guided transition normalised over the letters and [MASK],
        module doc); 0 when the rates are unguided (``changes_rates`` False: the x0 form, or
        one part)."""
        if not self.changes_rates:
            return parts.new_zeros(parts.shape[:-2])
        return self.mix(parts, progress).logsumexp(dim=-1)

    def mix(self, parts: Tensor, progress: Tensor) -> Tensor:
        """log m (..., V) = sum_k w_k(gamma(progress)) part_k, not normalised."""
        gamma = self.gamma(progress).expand(parts.shape[:-2])
        weights = self.weights(gamma).to(parts)  # (..., K)
        return (weights[..., None] * parts).sum(dim=-2)

    def combine_scores(self, parts: Tensor, progress: Tensor) -> Tensor:
        """D-CFG on concrete scores (SEDD): guided log-scores (..., V) from ``parts`` (..., K,
        V) of log-scores. The score distribution is tempered as ``combine`` tempers x0 (for an
        absorbing process the normalised scores of a masked position are p(x0_l | z_t)), and
        its total, the jump rate, is the weighted geometric mean of the parts' totals: the
        weights sum to 1, so for exact models, whose totals all equal the true rate
        1 / expm1(sigma(t)), the unmasking rate is unchanged."""
        if parts.shape[-2] == 1:
            return parts[..., 0, :]
        gamma = self.gamma(progress).expand(parts.shape[:-2])
        totals = (self.weights(gamma).to(parts) * parts.logsumexp(dim=-1)).sum(dim=-1)  # (...,)
        return self.combine(parts, progress) + totals[..., None]


def _widen(tilt: Tensor, vocab_size: int) -> Tensor:
    """``tilt`` (B, L, V') as (B, L, vocab_size): a classifier's vocabulary may stop short of
    the network's padded one, whose extra ids are never drawn (tilt 0 there)."""
    return nn.functional.pad(tilt, (0, vocab_size - tilt.shape[-1]))


def check_label_is_a_name(label: object, class_names: list[str] | None, model: str) -> None:
    """InputValueError (parameter ``label``) for a ``label`` that is no class name (a string):
    a class id such as 3, listing ``model``'s ``class_names`` when it has them (None: none, or
    only a classifier's, which is not loaded yet)."""
    if label is None or isinstance(label, str):
        return
    classes = f"; the classes of {model} are: {', '.join(class_names)}" if class_names else ""
    raise InputValueError(
        f"label must be a class name (a string), got {label!r}{classes}", parameter="label"
    )


def label_id(name: str, class_names: list[str] | None, model: str) -> int:
    """The class id of ``name`` among ``class_names`` (a checkpoint's ``conditioning.labels``,
    or a classifier's); InputValueError (parameter ``label``) listing the valid names, or
    saying that ``model`` has no classes."""
    if class_names is None:
        raise InputValueError(
            f"label {name!r}: {model} is an unconditional model (it has no classes); train a "
            "class-conditional one (data.name=labelled) or guide this one with a classifier",
            parameter="label",
        )
    if name not in class_names:
        raise InputValueError(
            f"label {name!r} is not a class of {model}{did_you_mean(name, class_names)}; its "
            f"classes are: {', '.join(class_names)}",
            parameter="label",
        )
    return class_names.index(name)


def check_classifier(
    classifier: NoisyClassifierGuide, class_names: list[str] | None, tokenizer_name: str
) -> None:
    """InputValueError (parameter ``classifier``) when ``classifier`` was trained for other
    classes than the generator's ``class_names`` (None: an unconditional generator, which takes
    the classifier's) or on another tokenizer than ``tokenizer_name``."""
    source = getattr(classifier, "source", "the classifier")
    if classifier.tokenizer_name != tokenizer_name:
        raise InputValueError(
            f"the classifier {source} reads the tokenizer {classifier.tokenizer_name!r}, the "
            f"generator's is {tokenizer_name!r}; train the classifier on the generator's data",
            parameter="classifier",
        )
    if class_names is not None and list(classifier.class_names) != list(class_names):
        raise InputValueError(
            f"the classifier {source} was trained for the classes "
            f"{', '.join(classifier.class_names)}; the generator's are {', '.join(class_names)} "
            "(same names, same order)",
            parameter="classifier",
        )


def check_noisy_states(
    trained_for: str, generator_objective: str, source: str | os.PathLike
) -> None:
    """InputValueError when a noisy classifier trained for a ``trained_for`` generator reads
    other noisy states than a ``generator_objective`` generator makes (masked vs uniform). A
    generator without noisy states (AR) is left to the guide, which names the kind it needs."""
    trained_states = registry.get("objective", trained_for).noisy_states
    states = registry.get("objective", generator_objective).noisy_states
    if states is not None and states != trained_states:
        raise InputValueError(
            f"{source} learnt p(y | z_t) on the {trained_states} states of the generators of "
            f"objective {trained_for}, and this generator's ({generator_objective}) are {states}; "
            "train one "
            "for it (genodiff classifier CONFIG generator=CKPT)",
            parameter="classifier",
        )
