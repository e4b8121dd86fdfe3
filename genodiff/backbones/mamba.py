"""Mamba (v1) mixer and the prenorm residual block, with mamba_ssm's parameter names and init.

Parameter names match ``mamba_ssm/modules/mamba_simple.py`` so checkpoints load unchanged:
in_proj, conv1d, x_proj, dt_proj, A_log, D, out_proj. ``layer_idx`` is kept for the recurrent
(step-wise) inference of the causal Mamba LM.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from genodiff.ops import add_norm, causal_conv1d, selective_scan


@functools.cache
def _upstream_step_kernels() -> tuple[Callable | None, Callable | None]:
    """(causal_conv1d_update, selective_state_update) when importable, else None each."""
    try:
        from causal_conv1d import causal_conv1d_update
    except (ImportError, OSError):
        causal_conv1d_update = None
    try:
        from mamba_ssm.ops.triton.selective_state_update import selective_state_update
    except (ImportError, OSError):
        selective_state_update = None
    return causal_conv1d_update, selective_state_update


class Mamba(nn.Module):
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
        """Arguments as mamba_ssm's ``Mamba`` (its ``ssm_cfg`` keys). ``use_fast_path`` is
        accepted for config compatibility: kernels are chosen per call by the ops."""
        super().__init__()
        self.d_model, self.d_state, self.d_conv = d_model, d_state, d_conv
        self.d_inner = int(expand * d_model)
        self.dt_rank = math.ceil(d_model / 16) if dt_rank == "auto" else dt_rank
        self.layer_idx = layer_idx

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

    def ssm(self, xz: torch.Tensor) -> torch.Tensor:
        """The mixer between the projections: xz = in_proj(hidden) (B, L, 2 d_inner) ->
        y (B, L, d_inner), ready for out_proj."""
        x, z = xz.transpose(1, 2).chunk(2, dim=1)  # (B, d_inner, L) each
        x = causal_conv1d(x, self.conv1d.weight.squeeze(1), self.conv1d.bias, activation="silu")
        x_dbl = self.x_proj(x.transpose(1, 2))  # (B, L, dt_rank + 2N)
        dt, B, C = x_dbl.split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = (dt @ self.dt_proj.weight.t()).transpose(1, 2)  # (B, d_inner, L); bias in the scan
        y = selective_scan(
            x,
            dt,
            -torch.exp(self.A_log.float()),  # (d_inner, N)
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
        return self.out_proj(self.ssm(self.in_proj(hidden_states)))

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

        conv_state and ssm_state are updated in place and returned.
        """
        dtype = hidden_states.dtype
        x, z = self.in_proj(hidden_states.squeeze(1)).chunk(2, dim=-1)  # (B, d_inner) each
        weight = self.conv1d.weight.squeeze(1)  # (d_inner, d_conv)
        conv_update, state_update = _upstream_step_kernels() if x.is_cuda else (None, None)
        if conv_update is not None and 2 <= self.d_conv <= 4:
            x = conv_update(x, conv_state, weight, self.conv1d.bias, "silu")
        else:
            conv_state.copy_(conv_state.roll(-1, dims=-1))  # drop the oldest input
            conv_state[:, :, -1] = x
            x = (conv_state * weight).sum(-1)
            if self.conv1d.bias is not None:
                x = x + self.conv1d.bias
            x = F.silu(x).to(dtype)

        dt, B, C = self.x_proj(x).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = F.linear(dt, self.dt_proj.weight)  # (B, d_inner); bias added below
        A = -torch.exp(self.A_log.float())  # (d_inner, N)
        if state_update is not None:
            y = state_update(
                ssm_state, x, dt, A, B, C, self.D, z=z, dt_bias=self.dt_proj.bias, dt_softplus=True
            )
        else:
            dt = F.softplus(dt + self.dt_proj.bias.to(dt.dtype))
            dA = torch.exp(dt.unsqueeze(-1) * A)  # (B, d_inner, N)
            dBx = (dt * x).unsqueeze(-1) * B.unsqueeze(1)  # (B, d_inner, N)
            ssm_state.copy_(ssm_state * dA + dBx)
            y = (ssm_state.to(dtype) * C.unsqueeze(1)).sum(-1)  # (B, d_inner)
            y = (y + self.D.to(dtype) * x) * F.silu(z)
        return self.out_proj(y).unsqueeze(1), conv_state, ssm_state


class Block(nn.Module):
    """Prenorm residual block: residual += hidden; hidden = mixer(norm(residual)).

    Returns (hidden, residual) like mamba_ssm's ``Block``; the model applies its final norm to
    hidden + residual.
    """

    def __init__(self, mixer: nn.Module, norm: nn.Module, residual_in_fp32: bool = True):
        super().__init__()
        self.mixer = mixer
        self.norm = norm
        self.residual_in_fp32 = residual_in_fp32

    def forward(
        self, hidden_states: torch.Tensor, residual: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        hidden_states, residual = add_norm(
            hidden_states, residual, self.norm, self.residual_in_fp32
        )
        return self.mixer(hidden_states), residual
