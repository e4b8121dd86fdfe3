"""Mamba (v1) mixer and the prenorm residual block, with mamba_ssm's parameter names and init.

Parameter names match ``mamba_ssm/modules/mamba_simple.py`` so checkpoints load unchanged:
in_proj, conv1d, x_proj, dt_proj, A_log, D, out_proj. ``layer_idx`` is kept for the recurrent
(step-wise) inference of the causal Mamba LM.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from genodiff.ops import (
    add_norm,
    causal_conv1d,
    causal_conv1d_update,
    selective_scan,
    selective_state_update,
)
from genodiff.ops.upstream import CAUSAL_CONV1D, MAMBA_INNER, upstream


class Mamba(nn.Module):
    #: Ranges of the ``ssm_cfg`` keys (see ``genodiff.config_values``).
    config_ranges = {
        "d_state": ">=1",
        "d_conv": ">=1",
        "expand": ">=1",
        "dt_min": ">0",
        "dt_max": ">0",
        "dt_scale": ">0",
        "dt_init_floor": ">0",
    }

    def __init__(
        self,
        d_model: int,
        d_state: int = 16,
        d_conv: int = 4,
        expand: int = 2,
        dt_rank: int | str = "auto",
        dt_min: float = 0.001,
        dt_max: float = 0.1,
        dt_init: str = "random",
        dt_scale: float = 1.0,
        dt_init_floor: float = 1e-4,
        conv_bias: bool = True,
        bias: bool = False,
        use_fast_path: bool = True,
        layer_idx: int | None = None,
    ):
        """Arguments as mamba_ssm's ``Mamba`` (its ``ssm_cfg`` keys). ``use_fast_path``, as
        upstream, runs the whole mixer as mamba_ssm's fused ``mamba_inner_fn`` where the ops
        would call the upstream kernels (see ``mix``); the function is the same."""
        super().__init__()
        self.d_model, self.d_state, self.d_conv = d_model, d_state, d_conv
        self.d_inner = int(expand * d_model)
        self.dt_rank = math.ceil(d_model / 16) if dt_rank == "auto" else dt_rank
        self.use_fast_path, self.layer_idx = use_fast_path, layer_idx

        self.in_proj = nn.Linear(d_model, 2 * self.d_inner, bias=bias)
        self.conv1d = nn.Conv1d(
            self.d_inner,
            self.d_inner,
            d_conv,
            groups=self.d_inner,
            padding=d_conv - 1,
            bias=conv_bias,
        )
        self.x_proj = nn.Linear(self.d_inner, self.dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, self.d_inner, bias=True)
        self._init_dt_proj(dt_init, dt_scale, dt_min, dt_max, dt_init_floor)

        # S4D-real init A = -(1..N) per channel, stored as log; A_log and D stay fp32.
        A = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(self.d_inner, 1)
        self.A_log = nn.Parameter(torch.log(A))  # (d_inner, N)
        self.A_log._no_weight_decay = True
        self.D = nn.Parameter(torch.ones(self.d_inner))
        self.D._no_weight_decay = True
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=bias)

    def _init_dt_proj(self, dt_init, dt_scale, dt_min, dt_max, dt_init_floor):
        """Weights keep the variance of dt; softplus(bias) ~ logUniform(dt_min, dt_max)."""
        std = self.dt_rank**-0.5 * dt_scale
        if dt_init == "constant":
            nn.init.constant_(self.dt_proj.weight, std)
        elif dt_init == "random":
            nn.init.uniform_(self.dt_proj.weight, -std, std)
        else:
            raise ValueError(f"dt_init must be 'random' or 'constant', got {dt_init!r}")
        log_dt = torch.rand(self.d_inner) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)
        dt = torch.exp(log_dt).clamp(min=dt_init_floor)
        with torch.no_grad():
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
        self.dt_proj.bias._no_reinit = True  # keep it through the model's _init_weights

    def in_proj_xz(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(B, L, d_model) -> xz (B, 2 d_inner, L), L innermost as the kernels want it (the
        projection and the transpose in one matmul, as upstream)."""
        batch, length, _ = hidden_states.shape
        xz = self.in_proj.weight @ hidden_states.reshape(batch * length, -1).t()  # (2 d_inner, BL)
        if self.in_proj.bias is not None:
            xz = xz + self.in_proj.bias.to(xz.dtype).unsqueeze(-1)
        return xz.view(-1, batch, length).transpose(0, 1)

    def mix(self, xz: torch.Tensor, out_proj: nn.Linear) -> torch.Tensor:
        """The mixer after the input projection: xz (B, 2 d_inner, L) -> out_proj(y) (B, L, d).

        ``out_proj`` is a parameter so that a weight-tied reverse direction (Caduceus) can use
        the forward module's. With ``use_fast_path``, where the upstream kernels would run, this
        is mamba_ssm's fused ``mamba_inner_fn`` (conv, projections, scan and out_proj in one
        autograd function), else ``ssm`` then ``out_proj``.
        """
        A = -torch.exp(self.A_log.float())  # (d_inner, N)
        if (
            self.use_fast_path
            and 2 <= self.d_conv <= 4
            and upstream(CAUSAL_CONV1D, xz) is not None  # mamba_inner_fn needs causal_conv1d
            and (inner := upstream(MAMBA_INNER, xz)) is not None
        ):
            return inner(
                xz,
                self.conv1d.weight,
                self.conv1d.bias,
                self.x_proj.weight,
                self.dt_proj.weight,
                out_proj.weight,
                out_proj.bias,
                A,
                None,  # B and C from x_proj
                None,
                self.D.float(),
                delta_bias=self.dt_proj.bias.float(),
                delta_softplus=True,
            )
        return out_proj(self.ssm(xz, A))

    def ssm(self, xz: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """The unfused mixer between the projections: xz (B, 2 d_inner, L) -> y (B, L, d_inner),
        ready for out_proj; A = -exp(A_log) (d_inner, N)."""
        x, z = xz.chunk(2, dim=1)  # (B, d_inner, L) each
        x = causal_conv1d(x, self.conv1d.weight.squeeze(1), self.conv1d.bias, activation="silu")
        x_dbl = self.x_proj(x.transpose(1, 2))  # (B, L, dt_rank + 2N)
        dt, B, C = x_dbl.split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = (dt @ self.dt_proj.weight.t()).transpose(1, 2)  # (B, d_inner, L); bias in the scan
        y = selective_scan(
            x,
            dt,
            A,
            B.transpose(1, 2),  # (B, N, L)
            C.transpose(1, 2),
            self.D.float(),
            z=z,
            delta_bias=self.dt_proj.bias.float(),
            delta_softplus=True,
        )  # (B, d_inner, L)
        return y.transpose(1, 2)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(B, L, d_model) -> (B, L, d_model)."""
        return self.mix(self.in_proj_xz(hidden_states), self.out_proj)

    def allocate_inference_cache(
        self, batch_size: int, dtype: torch.dtype | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Zero states for ``step``: conv_state (B, d_inner, d_conv), ssm_state (B, d_inner, N),
        in ``dtype`` or else the conv1d / dt_proj weight dtypes (as mamba_ssm)."""
        device = self.conv1d.weight.device
        conv_dtype = dtype or self.conv1d.weight.dtype
        ssm_dtype = dtype or self.dt_proj.weight.dtype
        return (
            torch.zeros(batch_size, self.d_inner, self.d_conv, device=device, dtype=conv_dtype),
            torch.zeros(batch_size, self.d_inner, self.d_state, device=device, dtype=ssm_dtype),
        )

    def step(
        self, hidden_states: torch.Tensor, conv_state: torch.Tensor, ssm_state: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One recurrent token, as mamba_ssm's ``Mamba.step``: hidden (B, 1, d) -> out (B, 1, d).

        conv_state and ssm_state are updated in place and returned. x enters the conv in
        conv_state's dtype (the kernel requires it; under autocast in_proj returns bf16).
        """
        x, z = self.in_proj(hidden_states.squeeze(1)).chunk(2, dim=-1)  # (B, d_inner) each
        weight = self.conv1d.weight.squeeze(1)  # (d_inner, d_conv)
        x = causal_conv1d_update(
            x.to(conv_state.dtype), conv_state, weight, self.conv1d.bias, "silu"
        )
        dt, B, C = self.x_proj(x).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = F.linear(dt, self.dt_proj.weight)  # (B, d_inner); bias added in the update
        A = -torch.exp(self.A_log.float())  # (d_inner, N)
        y = selective_state_update(
            ssm_state, x, dt, A, B, C, self.D, z=z, dt_bias=self.dt_proj.bias, dt_softplus=True
        )  # (B, d_inner)
        return self.out_proj(y).unsqueeze(1), conv_state, ssm_state


class Block(nn.Module):
    """Prenorm residual block: residual += hidden; hidden = mixer(norm(residual)).

    Returns (hidden, residual) like mamba_ssm's ``Block``; the model applies its final norm to
    hidden + residual. ``fused_add_norm`` selects mamba_ssm's fused add + norm kernel where the
    upstream kernels run (``genodiff.ops.add_norm``).
    """

    def __init__(
        self,
        mixer: nn.Module,
        norm: nn.Module,
        residual_in_fp32: bool = True,
        fused_add_norm: bool = False,
    ):
        super().__init__()
        self.mixer = mixer
        self.norm = norm
        self.residual_in_fp32 = residual_in_fp32
        self.fused_add_norm = fused_add_norm

    def add_norm(
        self, hidden_states: torch.Tensor, residual: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(norm(hidden + residual), hidden + residual): the mixer's input and the new residual."""
        return add_norm(
            hidden_states, residual, self.norm, self.residual_in_fp32, self.fused_add_norm
        )

    def forward(
        self, hidden_states: torch.Tensor, residual: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        hidden_states, residual = self.add_norm(hidden_states, residual)
        return self.mixer(hidden_states), residual
