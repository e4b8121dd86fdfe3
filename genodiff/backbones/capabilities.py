"""What a backbone declares about itself, so the core never probes it with ``hasattr``.

Every backbone exposes ``capabilities`` (a ``Capabilities``; built-ins set it in
``__init__``), with at least its output size ``vocab_size``; ``genodiff.backbones.build``
refuses a backbone that declares none.
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
    - ``vocab_size``: V, the size of the logits' last dimension (the padded vocabulary);
      required: memory guards and samplers size their work by it.
    - ``hidden_size``: width of ``hidden_states`` (Caduceus-PS: 2 * d_model); None when
      not declared.
    - ``class_conditioning``: ``forward(ids, sigma, inputs_embeds, labels=...)`` takes class
      labels (B,) in [0, C], C being the null label (``genodiff.conditioning``), and None
      there means the null label. A backbone that can be conditioned takes ``num_classes`` in
      its constructor and declares this when built with ``num_classes`` = C > 0; a labelled
      run on any other backbone is refused (``genodiff.model``).
    - ``max_length``: the longest sequence ``forward`` reads (HyenaDNA: its filter length
      ``l_max``); None: any length. Training and sampling check it before they start
      (``genodiff.trained_window.check_backbone_length``); ``max_length_key``: the
      ``model`` config key that sets it (HyenaDNA: ``layer.l_max``), named in the refusal.
    """

    vocab_size: int
    hidden_size: int | None = None
    time_conditioning: bool = False
    rc_equivariant: bool = False
    causal: bool = False
    recurrent_step: bool = False
    class_conditioning: bool = False
    max_length: int | None = None
    max_length_key: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.vocab_size, bool) or not isinstance(self.vocab_size, int):
            raise TypeError(f"Capabilities.vocab_size must be an integer, got {self.vocab_size!r}")
        if self.vocab_size < 1:
            raise ValueError(f"Capabilities.vocab_size must be >= 1, got {self.vocab_size}")


def capabilities_of(model: nn.Module) -> Capabilities:
    """``model.capabilities``; TypeError, saying what to declare, for a module that has none."""
    declared = getattr(model, "capabilities", None)
    if declared is None:
        raise TypeError(
            f"{type(model).__name__} declares no capabilities: a backbone sets "
            "self.capabilities = genodiff.backbones.Capabilities(vocab_size=V, ...) in its "
            "constructor, V being the size of its logits' last dimension"
        )
    if not isinstance(declared, Capabilities):
        raise TypeError(
            f"{type(model).__name__}.capabilities must be a genodiff.backbones.Capabilities, "
            f"got {type(declared).__name__}"
        )
    return declared
