"""The interface every objective implements; an objective never knows which backbone it drives.

An objective is an ``nn.Module`` so that objectives with parameters of their own (Plaid's
embeddings and learned schedule) are trained, averaged (EMA) and checkpointed with the
backbone; parameter-free objectives (MDLM, SEDD, D3PM, AR) simply hold none.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from genodiff.batch_shard import BatchShard
from genodiff.config_values import check_arguments
from genodiff.errors import InputValueError
from genodiff.guidance import Guidance
from genodiff.randomness.noise import Noise
from genodiff.samplers.base import Sampler
from genodiff.samplers.request import SampleRequest

# Each ``Objective.likelihood`` in words: (what its score is called, what it is of the NLL).
LIKELIHOOD_WORDS = {
    "exact": ("NLL (exact)", "exact"),
    "bound": ("NELBO (bound)", "bound"),
    "upstream": ("NELBO", "upstream MDLM's convention, [PAD] unscored: not a bound"),
}


class _ArgumentsChecked(ABCMeta):
    """Every construction of an objective checks its arguments against the declared
    ``config_ranges`` (``genodiff.config_values.check_arguments``), with the messages a config
    gets for ``objective.<key>``, before the constructor runs."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        check_arguments(cls, "objective", args, kwargs)
        return super().__call__(*args, **kwargs)


class Objective(nn.Module, metaclass=_ArgumentsChecked):
    """A training loss (a per-token NELBO or NLL in nats) and the samplers that go with it."""

    #: The samplers ``SampleRequest.sampler`` may name; the first is the default.
    samplers: ClassVar[Mapping[str, Sampler]]
    #: True when ``loss`` is the exact NLL (AR) rather than an upper bound (diffusion).
    exact_likelihood: bool = False
    #: True when the network is given the time (``forward(ids, sigma)``); the backbone must
    #: then declare ``capabilities.time_conditioning`` (checked before training).
    time_conditioning: bool = False
    #: The noisy states z_t of the forward process, as a noisy guidance classifier reads them
    #: (``genodiff.classifiers.noise``): "masked" ([MASK] tokens: MDLM, SEDD, D3PM), "uniform"
    #: (letters replaced by random letters: UDLM), None (no such states: AR, Plaid).
    noisy_states: ClassVar[str | None] = None
    #: Noise draws per held-out sequence when evaluating (set by configs that have it).
    eval_t_samples: int = 1
    #: What the objective needs of the backbone's ``capabilities.causal``: False for diffusion
    #: (a masked position is predicted from the context on both sides), True for next-token
    #: prediction, None when either works. Checked when the model is built (``genodiff.model``).
    causal_backbone: bool | None = False
    #: Which tokens ``loss`` scores and how [PAD] is treated, in words (``genodiff eval``
    #: reports it beside the scored-token count).
    scoring: str = "every non-[PAD] token; [PAD] is never corrupted"
    #: How [PAD] is treated, by name (``genodiff.processes.masked.PADDINGS``): "given" (never
    #: corrupted nor scored) unless a masked objective's ``padding`` says otherwise.
    padding: str = "given"
    #: Allowed ranges of constructor arguments, checked when a config is loaded and when an
    #: objective is constructed (``genodiff.config_values``); merged with a subclass's own table.
    config_ranges: ClassVar[dict[str, str]] = {"eval_t_samples": ">=1"}
    #: Options that configs saved by earlier genodiff versions hold for this objective and that
    #: it no longer takes, each with the one value that means what the objective does now
    #: (``from_saved`` drops them). New configs may not set them.
    retired_options: ClassVar[Mapping[str, Any]] = {}
    #: What a run saved with another value of a retired option should use instead.
    retired_advice: ClassVar[str] = ""
    #: Options that configs saved by earlier genodiff versions hold under an old name:
    #: {old key: (new key, {old value: the new value that means the same})}; ``from_saved``
    #: translates them. New configs may not set them.
    renamed_options: ClassVar[Mapping[str, tuple[str, Mapping[Any, Any]]]] = {}

    @property
    def likelihood(self) -> str:
        """What ``loss`` is of the NLL: "exact" (AR), "bound" (an upper bound in expectation:
        diffusion), or "upstream" (upstream MDLM's padded-text number, [PAD] unscored: not a
        bound on any -log p)."""
        if self.exact_likelihood:
            return "exact"
        return "upstream" if self.padding == "upstream" else "bound"

    @classmethod
    def from_saved(cls, options: Mapping[str, Any]) -> Objective:
        """The objective a run's ``objective`` section (its ``name`` removed) describes, also
        when a checkpoint of an earlier version wrote it (``current_options``)."""
        return cls(**cls.current_options(options))

    @classmethod
    def current_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """A saved ``objective`` section as this version names it: a renamed option is
        translated to the value that means what it meant; a retired option holding its one
        value is dropped; any other value is an InputValueError saying what to use instead.
        Other keys (``name`` too) pass through."""
        kwargs = dict(options)
        for old, (new, values) in cls.renamed_options.items():
            if old in kwargs:
                if new in kwargs:
                    raise InputValueError(
                        f"objective.{old} and objective.{new} are both set; {old} is the old "
                        f"name of {new}: keep {new} alone"
                    )
                value = kwargs.pop(old)
                if value not in values:
                    raise InputValueError(
                        f"objective.{old}={value!r}: {old} (the old name of {new}) took only "
                        f"{', '.join(map(repr, values))}"
                    )
                kwargs[new] = values[value]
        for key, value in cls.retired_options.items():
            if key in kwargs and kwargs.pop(key) != value:
                raise InputValueError(
                    f"this run was saved with objective.{key}={options[key]!r}; "
                    f"{cls.__name__} no longer takes {key} (it always does what "
                    f"{key}={value!r} did). {cls.retired_advice}"
                )
        return kwargs

    @abstractmethod
    def loss(
        self,
        model: nn.Module,
        input_ids: Tensor,
        generator: Noise | torch.Generator | None = None,
        shard: BatchShard | None = None,
        labels: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Per sequence: (NELBO summed over its scored tokens in nats (B,), scored tokens (B,)).

        ``input_ids`` is (B, L); [PAD] positions are neither corrupted nor scored.
        ``generator``: where the noise comes from: one generator for the batch (None: torch's
        global one; training), or per-row streams (``Noise``: scoring, ``Noise.per_window``),
        each row's draws then a function of its own stream alone. ``shard`` places the batch
        in a data-parallel global batch (see ``BatchShard``; one generator only). ``labels`` (B,)
        are the sequences' class labels for a class-conditional backbone (the null label
        stands for p(x)); every network call of the loss passes them on
        (``genodiff.conditioning.network_kwargs``), None keeps the unconditional call.
        """

    def check_backbone(self, model: nn.Module) -> None:
        """InputValueError for a backbone this objective cannot drive, beyond what
        ``causal_backbone`` says (Plaid: its width); called when the model is built
        (``genodiff.model``), so a training refuses it before writing anything. Default: any."""

    @torch.no_grad()
    def sample(
        self,
        model: nn.Module,
        request: SampleRequest,
        noise: Noise | torch.Generator | None = None,
    ) -> Tensor:
        """(request.num_samples, request.length) token ids drawn from ``model`` by the sampler
        ``request`` names. Positions where ``request.given`` is True hold ``request.template``
        unchanged. ``noise``: per-sequence streams (``genodiff.randomness.noise.Noise``), or one
        generator for the whole batch (None: torch's global one)."""
        request = self.resolve_guidance(request)
        return self.samplers[self.sampler_name(request)](self, model, request, noise)

    def sampler_name(self, request: SampleRequest) -> str:
        """The sampler ``request`` asks for (the default when None); ValueError if unknown, if
        ``request`` lacks a setting it needs (``Sampler.needs``), if it reuses predictions
        across time steps and this objective conditions on time, or if ``request`` asks for a
        class and the sampler has no guidance or does not draw it in its form
        (``Sampler.draws``)."""
        name = request.sampler or next(iter(self.samplers))
        sampler = self.samplers.get(name)
        if sampler is None:
            raise InputValueError(
                f"{type(self).__name__} has no sampler {name!r}; "
                f"choose one of: {', '.join(self.samplers)}",
                parameter="sampler",
            )
        if any(getattr(request, setting) is None for setting in sampler.needs):
            needed = " and ".join(f"a {setting}" for setting in sampler.needs)
            raise InputValueError(f"the {name} sampler needs {needed}", parameter=sampler.needs)
        if sampler.reuses_predictions and self.time_conditioning:
            others = [n for n, s in self.samplers.items() if not s.reuses_predictions]
            raise InputValueError(
                f"sampler {name!r} needs a model without time conditioning: it reuses the "
                "network's prediction while a sequence is unchanged, and with "
                "objective.time_conditioning=true the prediction changes with t at every step. "
                f"Choose one of: {', '.join(others)}",
                parameter="sampler",
            )
        if request.guidance is not None and not sampler.guided:
            raise InputValueError(
                f"{type(self).__name__}'s sampler {name!r} has no guided sampling (a label, "
                "gamma or classifier); MDLM, D3PM, SEDD, UDLM and AR models have",
                parameter="label",
            )
        if request.guidance is not None:
            self._check_form(name, sampler.resolved(request.guidance))
        return name

    def _check_form(self, name: str, guidance: Guidance) -> None:
        """InputValueError (parameter ``guidance_form``) when the sampler ``name`` does not draw
        ``guidance`` in its (resolved) form, naming the samplers that do."""
        form = guidance.form
        rates_vary = guidance.schedule != "constant" or self.time_conditioning
        sampler = self.samplers[name]
        if sampler.draws(form, rates_vary):
            return
        takers = [
            other
            for other, s in self.samplers.items()
            if s.draws(form, rates_vary) and not (s.reuses_predictions and self.time_conditioning)
        ]
        why = (
            " with a ramp schedule or a time-conditioned network (it jumps between unmasking "
            "events, and the guided rates would change between them)"
            if form in sampler.guidance_forms
            else f" (it draws: {', '.join(sampler.guidance_forms)})"
        )
        raise InputValueError(
            f"{type(self).__name__}'s sampler {name!r} does not draw the {form} form of "
            f"guidance{why}; "
            + (f"samplers that do: {', '.join(takers)}" if takers else "choose another form"),
            parameter="guidance_form",
        )

    def resolve_guidance(self, request: SampleRequest) -> SampleRequest:
        """``request`` with its guidance in the form its sampler draws it
        (``Sampler.resolved``: what the samplers read and the samples' provenance records),
        after ``sampler_name``'s checks."""
        name = self.sampler_name(request)
        if request.guidance is None:
            return request
        return replace(request, guidance=self.samplers[name].resolved(request.guidance))

    def steps_used(self, request: SampleRequest) -> int | None:
        """``request.steps``, or None when the sampler ``request`` asks for ignores it (what
        the samples' provenance records)."""
        return request.steps if self.samplers[self.sampler_name(request)].takes_steps else None
