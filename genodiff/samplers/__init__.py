"""Every objective's samplers, and what they share (``SampleRequest``, the time grid,
float64 categorical draws). An objective lists its samplers in one table
(``Objective.samplers``, ``{name: Sampler}``, the first the default):

- masked diffusion (MDLM, D3PM): ``MASKED_SAMPLERS`` below (``masked``, ``first_hitting``,
  ``semi_ar``);
- uniform-noise diffusion (UDLM): ``UNIFORM_SAMPLERS`` (``ancestral``, guided at the
  transition level only);
- SEDD: ``score_entropy``;  AR: ``autoregressive``; Plaid's Gaussian sampler lives with it
  (``genodiff.objectives.plaid``).
"""

from __future__ import annotations

from collections.abc import Mapping

from genodiff.guidance import GUIDANCE_FORMS
from genodiff.samplers.base import Sampler
from genodiff.samplers.first_hitting import first_hitting
from genodiff.samplers.masked import ancestral, cached
from genodiff.samplers.semi_ar import semi_autoregressive
from genodiff.samplers.uniform import ancestral as uniform_ancestral

MASKED_SAMPLERS: Mapping[str, Sampler] = {
    "ancestral": Sampler(ancestral, guidance_forms=GUIDANCE_FORMS),
    "cached": Sampler(cached, reuses_predictions=True, guidance_forms=GUIDANCE_FORMS),
    # at most a call per position
    "first-hitting": Sampler(
        first_hitting, takes_steps=False, guidance_forms=GUIDANCE_FORMS, event_driven=True
    ),
    "semi-ar": Sampler(
        semi_autoregressive, guidance_forms=GUIDANCE_FORMS, needs=("block", "stride")
    ),
}

# Every position may change at every step, and the network is time-conditioned: no caching.
# Guided at the transition level only (there is no x0 to draw from).
UNIFORM_SAMPLERS: Mapping[str, Sampler] = {
    "ancestral": Sampler(uniform_ancestral, guidance_forms=("transition",))
}

__all__ = ["MASKED_SAMPLERS", "UNIFORM_SAMPLERS"]
