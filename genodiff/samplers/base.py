"""One entry of an objective's sampler table: how to draw, and what it needs of the network.

Every objective lists its samplers in one table, ``Objective.samplers`` ``{name: Sampler}``
(the first entry is the default); ``Objective.sample`` looks the requested name up there and
calls the entry with the objective and the network. A sampler uses only what its objective
offers (e.g. masked-diffusion samplers: ``objective.process`` and ``x0_log_probs``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from genodiff.guidance import Guidance
from genodiff.randomness.noise import Noise, as_noise
from genodiff.samplers.request import SampleRequest


class Draw(Protocol):
    """(objective, model, request, noise) -> (request.num_samples, request.length) ids;
    positions where ``request.given`` is True hold ``request.template``. Every random number
    comes from ``noise`` (``genodiff.randomness.noise``), row by row."""

    def __call__(
        self,
        objective: Any,
        model: nn.Module,
        request: SampleRequest,
        noise: Noise,
    ) -> Tensor: ...


@dataclass(frozen=True)
class Sampler:
    """A sampling algorithm as an objective offers it.

    ``reuses_predictions``: the sampler keeps a network output across time steps while the
    sequence is unchanged, so it cannot serve a time-conditioned network (whose output changes
    with t at every step); ``Objective.sampler_name`` refuses that pairing before any sampling.
    ``takes_steps``: the sampler follows ``SampleRequest.steps`` (a time grid); False for one
    that sets its own number of network calls (first-hitting, left-to-right AR), whose samples
    then record no steps.
    ``guidance_forms``: the forms (``genodiff.guidance.GUIDANCE_FORMS``) in which the sampler
    draws a chosen class (``SampleRequest.guidance``, a ``genodiff.guidance.Guidance``); none:
    it has no guided sampling (``guided``), and a guided request is refused.
    ``event_driven``: the sampler jumps from one unmasking event to the next (first-hitting),
    so it draws the transition form only while each position's guided unmasking rate stays
    fixed between events: a constant schedule and a network without time conditioning
    (``Objective.sampler_name`` refuses the rest).
    ``needs``: the ``SampleRequest`` settings the sampler cannot draw without (semi-ar: its
    block and stride); ``Objective.sampler_name`` refuses a request that lacks one.
    """

    draw: Draw
    reuses_predictions: bool = False
    takes_steps: bool = True
    guidance_forms: tuple[str, ...] = ()
    event_driven: bool = False
    needs: tuple[str, ...] = ()

    @property
    def guided(self) -> bool:
        return bool(self.guidance_forms)

    def draws(self, form: str, rates_vary: bool) -> bool:
        """Whether the sampler draws guidance in ``form``; ``rates_vary``: the guided rates
        change with t (a ramp schedule, or a time-conditioned network)."""
        fixed_rates_needed = self.event_driven and form == "transition"
        return form in self.guidance_forms and not (fixed_rates_needed and rates_vary)

    def resolved(self, guidance: Guidance) -> Guidance:
        """``guidance`` with the form it is drawn in: its own ``form``, else its kind's
        ``default_form`` when this sampler draws that, else this sampler's first form (UDLM:
        transition; SEDD: x0). Whether the sampler draws it is ``Objective.sampler_name``'s
        check."""
        form = guidance.form or guidance.default_form
        if guidance.form is None and form not in self.guidance_forms:
            form = self.guidance_forms[0]
        return replace(guidance, form=form)

    def __call__(
        self,
        objective: Any,
        model: nn.Module,
        request: SampleRequest,
        noise: Noise | torch.Generator | None,
    ) -> Tensor:
        """Draw with ``noise``: a ``Noise`` (per-sequence streams), or one generator for the
        whole batch (None: torch's global one)."""
        device = next(model.parameters()).device
        return self.draw(objective, model, request, as_noise(noise, device))
