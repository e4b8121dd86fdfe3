"""Samplers for absorbing-state (masked) diffusion models: MDLM and D3PM."""

from genodiff.samplers.masked import MASKED_SAMPLERS, sample_masked

__all__ = ["MASKED_SAMPLERS", "sample_masked"]
