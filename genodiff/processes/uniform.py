"""The uniform-noise forward process of UDLM (Schiff et al., 2025), over the model's alphabet.

Each scored token x is replaced, independently, by a draw of

    q(z_t | x) = Cat(alpha_t x + (1 - alpha_t) / N),

i.e. kept with probability alpha_t and otherwise replaced by a uniform draw from the N letters
of the **alphabet** (it may draw x itself). Log-linear schedule: 1 - alpha_t = (1 - eps) t
(``schedules.LogLinearSchedule.mask_probability``), so alpha_0 = 1 and alpha_1 = eps; the same
alpha_t is used to corrupt, in the loss and in the sampler.

The alphabet is the tokenizer's ``sample_ids`` (DNA: A/C/G/T, N = 4). A position holding any
other id ([PAD], i.e. N bases and padding) is never corrupted and never scored; it stays in
the network's input as it is. **This differs from the reference code**, whose prior and noise
are uniform over every tokenizer id (for DNA: the specials, N and [MASK] too), so its network
must learn to undo noise into ids that never occur in data and its bound charges them.

``draw_states`` and ``states_at`` bear the names ``MaskedForwardProcess`` gives its own: a noisy
guidance classifier learns from the states of either (``genodiff.classifiers.noise``).

Categories are handled as alphabet indices 0..N-1 (``to_alphabet``) wherever the maths needs
them; the network reads and writes token ids.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from genodiff.batch_shard import BatchShard, shard_rows
from genodiff.errors import InputValueError
from genodiff.processes.schedules import LogLinearSchedule
from genodiff.processes.time_draws import sample_times, weighted_times
from genodiff.processes.uniform_posterior import posterior
from genodiff.randomness.noise import Noise, as_noise


class UniformForwardProcess:
    """Uniform noise over ``alphabet`` (token ids, at least 2) under the log-linear schedule
    with ``noise_eps``; continuous times in [sampling_eps, 1] or, with ``num_steps`` T > 0, on
    {1/T, ..., 1}, drawn low-discrepancy over the batch or iid."""

    def __init__(
        self,
        alphabet: Sequence[int],
        noise_eps: float = 1e-3,
        num_steps: int = 0,
        sampling_eps: float = 1e-3,
        low_discrepancy: bool = True,
    ) -> None:
        alphabet = [int(i) for i in alphabet]
        if len(alphabet) < 2 or len(set(alphabet)) != len(alphabet) or min(alphabet) < 0:
            raise InputValueError(
                f"uniform noise needs an alphabet of at least 2 distinct ids, got {alphabet}"
            )
        self.alphabet = alphabet
        self.schedule = LogLinearSchedule(noise_eps)
        self.num_steps = num_steps
        self.sampling_eps = sampling_eps
        self.low_discrepancy = low_discrepancy

    @property
    def size(self) -> int:
        """N, the number of letters."""
        return len(self.alphabet)

    def alphabet_ids(self, device: torch.device) -> Tensor:
        """(N,) the letters' token ids, in alphabet order."""
        return torch.tensor(self.alphabet, dtype=torch.long, device=device)

    def to_alphabet(self, ids: Tensor) -> Tensor:
        """Alphabet index (0..N-1) of each id (...); -1 where the id is not a letter."""
        table = torch.full((max(self.alphabet) + 1,), -1, dtype=torch.long, device=ids.device)
        table[self.alphabet_ids(ids.device)] = torch.arange(self.size, device=ids.device)
        inside = (ids >= 0) & (ids < table.numel())
        return torch.where(inside, table[ids.clamp(0, table.numel() - 1)], -1)

    def scored(self, input_ids: Tensor) -> Tensor:
        """(B, L) bool: the positions corrupted and scored (those holding a letter)."""
        return self.to_alphabet(input_ids) >= 0

    def alpha(self, t: Tensor) -> Tensor:
        """alpha_t = 1 - (1 - eps) t in float64, exactly 1 at t = 0."""
        return 1 - self.schedule.mask_probability(t.double())

    def dalpha(self, t: Tensor) -> Tensor:
        """d alpha / dt = -(1 - eps) in float64, shaped like ``t``."""
        return torch.full_like(t, -(1 - self.schedule.eps), dtype=torch.float64)

    def posterior(self, x: Tensor, z_t: Tensor, t: Tensor, s: Tensor) -> Tensor:
        """q(z_s | z_t, x) (..., N) in float64 for times s < t (broadcastable to ``z_t``'s
        shape): ``uniform_posterior.posterior`` under this schedule; ``x`` (..., N) a
        distribution over the letters (x_theta in the sampler), ``z_t`` letter indices."""
        return posterior(x, z_t, self.alpha(t), self.alpha(s))

    def network_sigma(self, t: Tensor) -> Tensor:
        """What the (time-conditioned) network is told for times ``t`` (B,): sigma(t) =
        -log alpha_t (B,), at most -log eps (6.9 for eps = 1e-3)."""
        return -torch.log(self.alpha(t)).float()

    def sample_t(
        self,
        n: int,
        device: torch.device,
        generator: Noise | torch.Generator | None = None,
    ) -> Tensor:
        """(n,) times (``time_draws.sample_times``), as the masked objectives draw them."""
        noise = as_noise(generator, device)
        return sample_times(n, noise, self.low_discrepancy, self.num_steps, self.sampling_eps)

    def states_at(
        self,
        input_ids: Tensor,
        t: Tensor,
        generator: Noise | torch.Generator | None = None,
        shard: BatchShard | None = None,
    ) -> Tensor:
        """z_t (B, L) ~ q(z_t | x) at times ``t`` (B,): each letter is replaced with probability
        1 - alpha_t by a uniform letter; other ids are kept. From one generator, or per-row
        streams (``Noise``). With a ``shard`` the draws are those of the global batch, our rows
        kept."""
        batch, length = input_ids.shape
        total, rows = shard_rows(shard, batch)
        device = input_ids.device
        noise = as_noise(generator, device)
        replace = noise.uniform(total, length)[rows]  # (B, L) float64
        letter = noise.integers(self.size, total, length)[rows]  # (B, L)
        noisy = replace < (1 - self.alpha(t))[:, None]  # (B, L)
        noisy &= self.scored(input_ids)
        return torch.where(noisy, self.alphabet_ids(device)[letter], input_ids)

    def draw_states(
        self,
        input_ids: Tensor,
        generator: Noise | torch.Generator | None = None,
        shard: BatchShard | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Times t (B,) and z_t (B, L) for a batch (of the global batch with a ``shard``)."""
        t, _, z_t = self.draw_weighted_states(input_ids, 1.0, generator, shard)
        return t, z_t

    def draw_weighted_states(
        self,
        input_ids: Tensor,
        power: float,
        generator: Noise | torch.Generator | None = None,
        shard: BatchShard | None = None,
        whole_range: bool = False,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Times t (B,), their weights (B,) (``time_draws.weighted_times`` with ``power``; 1
        draws exactly as ``draw_states``) and z_t (B, L), of the global batch with a
        ``shard``; from one generator, or per-row streams (``Noise``). Continuous times lie in
        [sampling_eps, 1] as training draws them, or with ``whole_range`` in all of [0, 1],
        the range the bound integrates over (held-out scoring, ``UDLM.loss``)."""
        total, rows = shard_rows(shard, input_ids.shape[0])
        noise = as_noise(generator, input_ids.device)
        lowest = 0.0 if whole_range else self.sampling_eps
        args = (self.low_discrepancy, self.num_steps, lowest, power)
        t, weight = weighted_times(total, noise, *args)
        t, weight = t[rows], weight[rows]  # (B,) each
        return t, weight, self.states_at(input_ids, t, noise, shard)

    @property
    def scoring(self) -> str:
        """Which tokens the NELBO scores, in words (``genodiff eval``)."""
        return (
            f"NELBO over every token of the {self.size}-letter alphabet; any other id ([PAD]) "
            "is never corrupted nor scored (a bound on -log p(x | where [PAD] is))"
        )
