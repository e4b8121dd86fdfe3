"""What a backbone declares about itself, so the core never probes it with ``hasattr``.

Every backbone exposes ``capabilities`` (a ``Capabilities``; built-ins set it in
``__init__``). A module that declares nothing is taken as the plainest backbone: not
time-conditioned, not RC-equivariant, bidirectional, no recurrent ``step``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn


@dataclass(frozen=True)
class Capabilities:
    """Declared behaviour of a backbone.

    - ``time_conditioning``: ``forward(ids, sigma)`` uses sigma (B,); otherwise sigma is
      ignored, and an objective configured with ``time_conditioning=true`` is refused.
    - ``rc_equivariant``: logits of the reverse complement are the reverse-complemented
      logits (Caduceus-PS); such models need no RC augmentation or conjoining.
    - ``causal``: position i's logits depend on positions <= i only (AR baselines).
    - ``recurrent_step``: ``allocate_inference_cache(n)`` and ``step(ids (n,), cache)``
      -> next-token logits (n, V), O(1) work per token.
    - ``hidden_size``: width of ``hidden_states`` (Caduceus-PS: 2 * d_model); None when
      not declared.
    """

    hidden_size: int | None = None
    time_conditioning: bool = False
    rc_equivariant: bool = False
    causal: bool = False
    recurrent_step: bool = False


def capabilities_of(model: nn.Module) -> Capabilities:
    """``model.capabilities``; the plainest declaration for a module that has none."""
    declared = getattr(model, "capabilities", None)
    if declared is None:
        return Capabilities()
    if not isinstance(declared, Capabilities):
        raise TypeError(
            f"{type(model).__name__}.capabilities must be a genodiff.backbones.Capabilities, "
            f"got {type(declared).__name__}"
        )
    return declared
