"""The absorbing ([MASK]) forward process that MDLM, SEDD and D3PM each hold.

Each token is replaced by [MASK] with probability p_t = 1 - alpha(t)
(``schedule.mask_probability``). What [PAD] means picks how it is treated (``padding``, the
config key ``objective.padding``; ``PADDINGS`` says each in words):

- ``given`` (DNA: N -> [PAD] is missing data): [PAD] is never corrupted nor scored, so the
  network always sees where padding is. For padded sentences this bounds -log p(x | where
  [PAD] is): the length is given, not charged.
- ``bound`` (padded text, the plugin's demo): [PAD] is corrupted and scored like any token, so
  the NELBO is a bound on -log p of the padded sequence, its length included (each [PAD] is
  a token the model predicts), and the model learns where a sentence ends: samplers may draw
  [PAD], and samples end where the model puts it.
- ``upstream`` (upstream MDLM's LM1B convention, comparable with the paper's numbers): [PAD] is
  corrupted like any token but never scored. The [PAD] terms are left out, so the number is
  not a bound on any -log p (it can sit below the true NLL), and a model never asked to
  predict [PAD] does not learn where a sentence ends.

The process owns what the masked objectives share and nothing of their losses:

- time draws (``sample_t``): low-discrepancy or iid, continuous t in [sampling_eps, 1] or,
  with ``num_steps`` T > 0, discrete t on {1/T, ..., 1};
- noise draws for a batch (``draw_noise``), from one generator honouring a data-parallel
  ``BatchShard`` (training) or from per-row streams (``genodiff.randomness.noise.Noise``: scoring);
- noisy states z_t as a noisy guidance classifier reads them (``draw_states``, ``states_at``:
  the names ``UniformForwardProcess`` offers too, ``genodiff.classifiers.noise``);
- the ids a sampler may draw (``undrawable``: never [MASK], only ``sample_ids`` when set,
  plus [PAD] when it is corrupted);
- what the network is told about t (``network_sigma``: sigma(t) capped, or None without time
  conditioning).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

from genodiff.batch_shard import BatchShard, shard_rows
from genodiff.config_values import ConfigError
from genodiff.errors import InputValueError
from genodiff.processes.schedules import NoiseSchedule
from genodiff.processes.time_draws import sample_times
from genodiff.randomness.noise import Noise, as_noise

# Time conditioning sees sigma(t) capped here (sigma(1) is infinite when alpha(1) = 0).
MAX_CONDITIONING_SIGMA = 20.0

# The treatments of [PAD] (``objective.padding``): what a NELBO over the scored tokens then is.
Padding = Literal["given", "bound", "upstream"]
PADDINGS = {
    "given": "objective.padding=given: NELBO over every non-[PAD] token; [PAD] is never "
    "corrupted (a bound on -log p(x | where [PAD] is): padding, hence a sequence's length, is "
    "given)",
    "bound": "objective.padding=bound: NELBO over every token, [PAD] included; [PAD] is "
    "corrupted and scored like any token (a bound on -log p of the padded sequence, its length "
    "included)",
    "upstream": "objective.padding=upstream: NELBO over every non-[PAD] token; [PAD] is "
    "corrupted but never scored (upstream MDLM's convention, comparable with its LM1B numbers; "
    "the [PAD] terms are left out, so it is not a bound on -log p)",
}


class MaskedForwardProcess:
    """Masking noise under ``schedule``; ``mask_id``, ``pad_id`` and ``sample_ids`` (the ids
    samplers may draw; None = every id but [MASK]) come from the run's tokenizer; ``padding``
    is one of ``PADDINGS`` (see the module doc)."""

    def __init__(
        self,
        mask_id: int,
        pad_id: int,
        schedule: NoiseSchedule,
        num_steps: int = 0,
        sampling_eps: float = 1e-3,
        low_discrepancy: bool = True,
        time_conditioning: bool = False,
        sample_ids: Sequence[int] | None = None,
        padding: Padding = "given",
    ) -> None:
        if padding not in PADDINGS:
            raise ConfigError(
                f"objective.padding must be one of {', '.join(PADDINGS)}, got {padding!r}"
            )
        if padding == "bound" and pad_id == mask_id:
            raise ConfigError(
                "objective.padding=bound scores [PAD] as a token, but this tokenizer pads with "
                f"its [MASK] id ({mask_id}), which the model never predicts; use "
                "objective.padding=upstream, or data without padding (wrap: true)"
            )
        if sample_ids is not None and (not sample_ids or mask_id in sample_ids):
            raise InputValueError(
                f"sample_ids must be a non-empty list of ids without [MASK] ({mask_id}), "
                f"got {sample_ids}"
            )
        self.mask_id = mask_id
        self.pad_id = pad_id
        self.schedule = schedule
        self.num_steps = num_steps
        self.sampling_eps = sampling_eps
        self.low_discrepancy = low_discrepancy
        self.time_conditioning = time_conditioning
        self.sample_ids = None if sample_ids is None else [int(i) for i in sample_ids]
        self.padding = padding
        self._undrawable: dict[tuple[int, torch.device], Tensor] = {}  # undrawable's, made once

    def sample_t(
        self,
        n: int,
        device: torch.device,
        generator: Noise | torch.Generator | None = None,
    ) -> Tensor:
        """(n,) times (``time_draws.sample_times``): continuous in [sampling_eps, 1], or on
        {1/T, ..., 1} with ``num_steps`` T > 0."""
        noise = as_noise(generator, device)
        return sample_times(n, noise, self.low_discrepancy, self.num_steps, self.sampling_eps)

    def draw_noise(
        self,
        input_ids: Tensor,
        generator: Noise | torch.Generator | None = None,
        shard: BatchShard | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Times t (B,) and masked positions (B, L); [PAD] positions are masked unless
        ``padding`` is "given". From one generator, or per-row streams (``Noise``: each row
        draws its time, then its L uniforms). With a ``shard``, both are drawn for the global
        batch and our rows kept."""
        batch, length = input_ids.shape
        total, rows = shard_rows(shard, batch)
        noise = as_noise(generator, input_ids.device)
        t = self.sample_t(total, input_ids.device, noise)[rows]  # (B,)
        draw = noise.uniform(total, length, dtype=torch.float32)[rows]  # (B, L)
        return t, self.masked_by(input_ids, t, draw)

    def masked_by(self, input_ids: Tensor, t: Tensor, draw: Tensor) -> Tensor:
        """(B, L) bool: the positions that uniform ``draw`` (B, L) masks at times ``t`` (B,),
        each with the schedule's mask probability; [PAD] unless ``padding`` is "given"."""
        p_t = self.schedule.mask_probability(t.double()).to(draw.dtype)  # (B,)
        masked = draw < p_t[:, None]  # (B, L)
        if self.padding == "given":
            masked &= input_ids != self.pad_id
        return masked

    def corrupt(self, input_ids: Tensor, masked: Tensor) -> Tensor:
        """x_t (B, L): ``input_ids`` with the ``masked`` positions (B, L) set to [MASK]."""
        return input_ids.masked_fill(masked, self.mask_id)

    def draw_states(
        self,
        input_ids: Tensor,
        generator: Noise | torch.Generator | None = None,
        shard: BatchShard | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Times t (B,) and the states x_t (B, L) at them, drawn as ``draw_noise`` draws."""
        t, masked = self.draw_noise(input_ids, generator, shard)
        return t, self.corrupt(input_ids, masked)

    def states_at(
        self, input_ids: Tensor, t: Tensor, generator: torch.Generator | None = None
    ) -> Tensor:
        """x_t (B, L) at the given times ``t`` (B,)."""
        draw = torch.rand(input_ids.shape, device=input_ids.device, generator=generator)
        return self.corrupt(input_ids, self.masked_by(input_ids, t, draw))

    def scored(self, input_ids: Tensor) -> Tensor:
        """(B, L) bool: the positions a loss scores: every one with ``padding`` "bound", else
        every one but [PAD]."""
        if self.padding == "bound":
            return torch.ones_like(input_ids, dtype=torch.bool)
        return input_ids != self.pad_id

    def scored_masked(self, input_ids: Tensor, masked: Tensor) -> Tensor:
        """(B, L) bool: the masked positions (B, L) that a loss scores."""
        return masked & self.scored(input_ids)

    def undrawable(self, vocab: int, device: torch.device) -> Tensor:
        """(V,) bool: the columns a sampler must never draw ([MASK], and every id outside
        ``sample_ids`` when it is set, except [PAD] when it is corrupted: the model predicts
        padding, so a sample ends where it draws it). Made once per (vocab, device) and kept
        (read it, never write it): a sampler step replayed from a CUDA graph reads it, and
        making it copies the ids from the host."""
        key = (vocab, torch.device(device))
        if key not in self._undrawable:
            self._undrawable[key] = self._make_undrawable(vocab, device)
        return self._undrawable[key]

    def _make_undrawable(self, vocab: int, device: torch.device) -> Tensor:
        if self.sample_ids is None:
            blocked = torch.zeros(vocab, dtype=torch.bool, device=device)
        else:
            blocked = torch.ones(vocab, dtype=torch.bool, device=device)
            blocked[self.sample_ids] = False
            if self.padding != "given":
                blocked[self.pad_id] = False
        blocked[self.mask_id] = True
        return blocked

    @property
    def scoring(self) -> str:
        """Which tokens the NELBO scores and what it bounds, in words (``genodiff eval``)."""
        return PADDINGS[self.padding]

    def network_sigma(self, t: Tensor) -> Tensor | None:
        """What a time-conditioned network is given for times ``t`` (B,): sigma(t) capped at
        ``MAX_CONDITIONING_SIGMA`` (B,); None without time conditioning."""
        if not self.time_conditioning:
            return None
        return self.schedule.sigma(t).clamp_max(MAX_CONDITIONING_SIGMA)


class HoldsMaskedProcess:
    """For an objective that holds a ``MaskedForwardProcess`` as ``process`` (MDLM, SEDD,
    D3PM): what it declares about time conditioning, padding and scoring is the process's,
    read from it rather than kept twice. Runs saved before ``padding`` existed name
    ``mask_padding`` instead (``renamed_options``)."""

    process: MaskedForwardProcess
    noisy_states = "masked"
    renamed_options = {"mask_padding": ("padding", {False: "given", True: "upstream"})}

    @property
    def time_conditioning(self) -> bool:
        return self.process.time_conditioning

    @property
    def padding(self) -> str:
        return self.process.padding

    @property
    def scoring(self) -> str:
        return self.process.scoring
