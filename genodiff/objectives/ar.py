"""Autoregressive (AR) next-token prediction: the exact-likelihood baseline of the MDLM paper.

A window x = (x_1, ..., x_L) is scored token by token under a causal backbone fed
[BOS] x_1 ... x_{L-1}:

    -log p(x) = - sum_{i=1..L, x_i != [PAD]} log softmax(f([BOS] x_{<L}))_i[x_i],

so all L tokens are scored, the same tokens a diffusion model scores (N bases, stored as
[PAD], are skipped as targets but still read as context). The softmax runs over the model's
whole (padded) vocabulary, the same convention as the diffusion objectives, so the NLL is
exact and its perplexity compares with their bounds.

Sampling draws one token at a time, restricted to A/C/G/T: the next-token distribution is
renormalised over the four bases (then temperature / nucleus are applied), so special tokens
and N are never produced. Mamba runs recurrently (``allocate_inference_cache`` / ``step``:
one constant-size state per layer); a backbone without ``step`` (HyenaDNA) recomputes the full
forward pass on the prefix for every new token.
"""

from __future__ import annotations

import weakref

import torch
from torch import Tensor, nn

from genodiff.objectives.base import Objective
from genodiff.registry import register_objective
from genodiff.sampling import SampleRequest, sample_categorical, sharpen
from genodiff.tokenizers import DNATokenizer

_TOKENIZER = DNATokenizer()
# Backbones already probed for causality (weak: a checked model can still be freed).
_CAUSAL_CHECKED: weakref.WeakSet[nn.Module] = weakref.WeakSet()
# A change at the last position may move earlier logits by at most this fraction of the
# change it makes at its own position (float32 FFT round-off in HyenaDNA is ~1e-7).
_CAUSAL_TOLERANCE = 1e-3


def check_causal(model: nn.Module, bos_id: int = _TOKENIZER.bos_id) -> None:
    """ValueError if ``model``'s earlier logits depend on a later token (a bidirectional
    backbone such as Caduceus, on which next-token prediction would read the answer).

    Probe: two 8-token inputs differing only in the last token, in eval mode (no dropout)
    and float32; run once per model instance.
    """
    if model in _CAUSAL_CHECKED:
        return
    device = next(model.parameters()).device
    a_id, c_id, g_id, t_id = _TOKENIZER.base_ids
    probe = torch.tensor([[bos_id, a_id, c_id, g_id, t_id, a_id, c_id, g_id]], device=device)
    altered = probe.clone()
    altered[0, -1] = t_id
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), torch.autocast(device.type, enabled=False):
            before, after = model(probe).float(), model(altered).float()  # (1, 8, V) each
    finally:
        model.train(was_training)
    change = (after - before).abs()  # (1, 8, V)
    leak, own = change[:, :-1].max(), change[:, -1].max()
    if leak > _CAUSAL_TOLERANCE * own:
        raise ValueError(
            f"objective 'ar' needs a causal backbone, but {type(model).__name__}'s predictions "
            "at earlier positions change with a later token (a bidirectional model such as "
            "Caduceus would see the token it is asked to predict). Use model=mamba or "
            "model=hyena, or a diffusion objective (objective=mdlm) for bidirectional models."
        )
    _CAUSAL_CHECKED.add(model)


@register_objective("ar")
class AR(Objective):
    """Next-token cross-entropy on causal backbones; ``loss`` is the exact NLL."""

    samplers = ("ancestral",)
    exact_likelihood = True
    eval_t_samples = 1  # deterministic: no noise to average over

    def __init__(
        self,
        bos_id: int = _TOKENIZER.bos_id,
        pad_id: int = _TOKENIZER.pad_id,
        base_ids: tuple[int, ...] = _TOKENIZER.base_ids,
    ) -> None:
        super().__init__()
        self.bos_id = bos_id
        self.pad_id = pad_id
        self.base_ids = tuple(base_ids)

    def shifted(self, input_ids: Tensor) -> Tensor:
        """The model input [BOS] x_1 ... x_{L-1}: (B, L)."""
        bos = input_ids.new_full((input_ids.shape[0], 1), self.bos_id)
        return torch.cat([bos, input_ids[:, :-1]], dim=1)

    def loss(
        self, model: nn.Module, input_ids: Tensor, generator: torch.Generator | None = None
    ) -> tuple[Tensor, Tensor]:
        """Per sequence: (NLL summed over its non-[PAD] tokens in nats (B,), their count (B,)).

        ``generator`` is unused: the loss is deterministic.
        """
        check_causal(model, self.bos_id)
        log_p = model(self.shifted(input_ids)).float().log_softmax(dim=-1)  # (B, L, V)
        nll = -log_p.gather(-1, input_ids[..., None]).squeeze(-1)  # (B, L)
        scored = input_ids != self.pad_id  # (B, L)
        return torch.where(scored, nll, 0.0).sum(dim=-1), scored.sum(dim=-1)

    def _draw(
        self, logits: Tensor, request: SampleRequest, generator: torch.Generator | None
    ) -> Tensor:
        """One base per row from next-token logits (n, V), renormalised over A/C/G/T."""
        bases = torch.tensor(self.base_ids, device=logits.device)
        log_p = logits.float().log_softmax(dim=-1)[:, bases]  # (n, 4)
        probs = sharpen(log_p, request.temperature, request.top_p)  # (n, 4) float64
        return bases[sample_categorical(probs, generator)]  # (n,)

    @torch.no_grad()
    def sample(
        self, model: nn.Module, request: SampleRequest, generator: torch.Generator | None = None
    ) -> Tensor:
        """Left to right, one network call per position (``request.steps`` is unused).

        A given position keeps its template token and is fed to the model as context (a
        given prefix acts as a prompt); the others are drawn from the next-token
        distribution over A/C/G/T with the request's temperature and top-p.
        """
        self.sampler_name(request)
        device = next(model.parameters()).device
        n, length = request.num_samples, request.length
        x, given = request.canvas(self.pad_id, device)  # (n, L) each
        bos = torch.full((n, 1), self.bos_id, dtype=torch.long, device=device)
        recurrent = hasattr(model, "step") and hasattr(model, "allocate_inference_cache")
        if recurrent:
            cache = model.allocate_inference_cache(n)
            logits = model.step(bos, cache)  # (n, V): distribution of x_1
        for i in range(length):
            if not given[:, i].all():
                if not recurrent:
                    logits = model(torch.cat([bos, x[:, :i]], dim=1))[:, -1]  # (n, V)
                draw = self._draw(logits, request, generator)
                x[:, i] = torch.where(given[:, i], x[:, i], draw)
            if recurrent and i < length - 1:
                logits = model.step(x[:, i], cache)  # (n, V): distribution of x_{i+2}
        return x
