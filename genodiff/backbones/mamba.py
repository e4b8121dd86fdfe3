"""Mamba (v1) mixer and the prenorm residual block, with mamba_ssm's parameter names and init.

Parameter names match ``mamba_ssm/modules/mamba_simple.py`` so checkpoints load unchanged:
in_proj, conv1d, x_proj, dt_proj, A_log, D, out_proj. ``layer_idx`` is kept for the recurrent
(step-wise) inference of the causal Mamba LM.

Where nothing needs a gradient (``genodiff.ops.inference``) a mixer runs as
``mix_directions``: one pass over the data in (B, L, channels) layout, without transposes,
flips or copies, that also runs both directions of a bidirectional (Caduceus) mixer at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from genodiff.backbones.meta_build import computed_on_cpu
from genodiff.errors import InputValueError
from genodiff.ops import (
    add_norm,
    causal_conv1d,
    causal_conv1d_update,
    inference_path,
    mixer_conv,
    mixer_scan,
    selective_scan,
    selective_state_update,
)
from genodiff.ops.inference import scratch
from genodiff.ops.upstream import CAUSAL_CONV1D, MAMBA_INNER, SELECTIVE_SCAN, upstream


def s4d_real_log_a(d_inner: int, d_state: int) -> torch.Tensor:
    """log A for A = (1..d_state) in every channel (the scan uses -exp(A_log)): (d_inner, N)."""
    return torch.arange(1, d_state + 1, dtype=torch.float32).log().repeat(d_inner, 1)


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
        self.A_log = nn.Parameter(computed_on_cpu(s4d_real_log_a, self.d_inner, d_state))
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
            raise InputValueError(f"dt_init must be 'random' or 'constant', got {dt_init!r}")

        def inverse_softplus_of_dt() -> torch.Tensor:  # (d_inner,)
            log_dt = torch.rand(self.d_inner) * (math.log(dt_max) - math.log(dt_min))
            dt = torch.exp(log_dt + math.log(dt_min)).clamp(min=dt_init_floor)
            return dt + torch.log(-torch.expm1(-dt))

        with torch.no_grad():
            self.dt_proj.bias.copy_(computed_on_cpu(inverse_softplus_of_dt))
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
        y = self.ssm(xz, A)  # (B, d_inner, L)
        weight = out_proj.weight.mT.expand(y.shape[0], -1, -1)  # (B, d_inner, d)
        if out_proj.bias is None:  # y read transposed in place, as out_proj(y.mT) would copy it
            return torch.bmm(y.mT, weight)  # (B, L, d)
        return torch.baddbmm(out_proj.bias, y.mT, weight)

    def ssm(self, xz: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """The unfused mixer between the projections: xz (B, 2 d_inner, L) -> y (B, d_inner, L);
        A = -exp(A_log) (d_inner, N). Every tensor keeps L innermost, as the scan wants it: the
        projections are batched matmuls from the left (``left_matmul``), never a copy of a
        (B, d_inner, L) tensor in the transposed layout."""
        x, z = xz.chunk(2, dim=1)  # (B, d_inner, L) each
        x = causal_conv1d(x, self.conv1d.weight.squeeze(1), self.conv1d.bias, activation="silu")
        x_dbl = left_matmul(self.x_proj.weight, x)  # (B, dt_rank + 2N, L); x_proj has no bias
        dt, B, C = x_dbl.split([self.dt_rank, self.d_state, self.d_state], dim=1)
        dt = left_matmul(self.dt_proj.weight, dt)  # (B, d_inner, L); the bias is in the scan
        y = selective_scan(
            x,
            dt,
            A,
            B,  # (B, N, L)
            C,
            self.D.float(),
            z=z,
            delta_bias=self.dt_proj.bias.float(),
            delta_softplus=True,
        )
        return y  # (B, d_inner, L)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(B, L, d_model) -> (B, L, d_model)."""
        if one_pass(self, hidden_states):
            return mix_directions([self], hidden_states, [self.in_proj], [self.out_proj])
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


def left_matmul(weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """weight (P, Q) @ x (B, Q, L) -> (B, P, L), as one batched matmul. (``weight @ x`` folds
    x into one (B L, Q) matrix: a copy of x transposed.)"""
    return torch.bmm(weight.expand(x.shape[0], -1, -1), x)


def one_pass(module: nn.Module, hidden_states: torch.Tensor) -> bool:
    """Whether ``module`` (a mixer) runs as ``mix_directions`` on ``hidden_states``: nothing
    needs a gradient, the exact kernels run (not the upstream ones), and the states and every
    weight share one dtype, float32 or float64, outside autocast (the training path's
    intermediate roundings to bf16 are not reproduced)."""
    params = list(module.parameters())
    dtype = hidden_states.dtype
    return (
        inference_path(hidden_states, *params)
        and upstream(SELECTIVE_SCAN, hidden_states) is None
        and dtype in (torch.float32, torch.float64)
        and not torch.is_autocast_enabled(hidden_states.device.type)
        and all(p.dtype == dtype for p in params)
    )


def mix_directions(
    mixers: Sequence[Mamba],
    hidden_states: torch.Tensor,
    in_projs: Sequence[nn.Linear],
    out_projs: Sequence[nn.Linear],
    strategy: str = "add",
) -> torch.Tensor:
    """One or two mixers as one inference pass: hidden (B, L, d_model) -> (B, L, d_model).

    ``mixers[0]`` runs forward in time; ``mixers[1]``, if given, backward (it computes
    flip(mixer(flip(hidden))) over the sequence), and the two are combined by ``strategy``:
    "add" or "ew_multiply". ``in_projs`` and ``out_projs`` hold one projection that both
    directions share (weight tying) or one per direction. in_proj, x_proj and out_proj are one
    matmul each (batched over the directions); the conv and the scan (with dt_proj) are one
    kernel call each (``genodiff.ops.mixer_conv`` / ``mixer_scan``). Equal to the separate
    passes up to rounding. For calls that need no gradient (``one_pass``). Its temporaries
    xz, u, x_dbl and y die inside the call: inside ``genodiff.ops.inference.reused_buffers``
    (a sampler's run) they are the context's buffers (``scratch``), written again by each call.
    """
    first, S = mixers[0], len(mixers)
    batch, length, _ = hidden_states.shape
    D, dtype = first.d_inner, hidden_states.dtype

    def stack(get: Callable[[Mamba], torch.Tensor]) -> torch.Tensor:
        return torch.stack([get(m) for m in mixers])

    P, summed = len(in_projs), strategy == "add" and len(out_projs) == 1
    xz = scratch("xz", hidden_states, batch, length, P, 2 * D)
    _linear(hidden_states, in_projs, out=xz.view(batch * length, P * 2 * D))
    has_bias = first.conv1d.bias is not None
    conv_bias = stack(lambda m: m.conv1d.bias) if has_bias else xz.new_zeros(S, D)
    u = scratch("u", xz, S, batch, length, D)
    mixer_conv(xz, stack(lambda m: m.conv1d.weight[:, 0]), conv_bias, out=u)
    x_weight = stack(lambda m: m.x_proj.weight).transpose(1, 2)  # (S, D, R + 2N)
    x_dbl = scratch("x_dbl", u, S, batch * length, x_weight.shape[2])  # (S, BL, R + 2N)
    torch.bmm(u.view(S, batch * length, D), x_weight, out=x_dbl)
    y = mixer_scan(  # (B, L, S or 1, D); as ``ssm``: A, D and the dt bias pass through fp32
        u,
        x_dbl.view(S, batch, length, -1),
        stack(lambda m: m.dt_proj.weight),  # (S, D, R): dt_proj runs in the scan
        stack(lambda m: -torch.exp(m.A_log.float())).to(dtype),
        stack(lambda m: m.D.float()).to(dtype),
        xz,
        stack(lambda m: m.dt_proj.bias.float()).to(dtype),
        summed,
        out=scratch("y", u, batch, length, 1 if summed else S, D),
    )
    return _project_out(y, out_projs, strategy, S)


def _linear(x: torch.Tensor, projs: Sequence[nn.Linear], out: torch.Tensor) -> torch.Tensor:
    """out (B L, P out_features) = cat[proj(x) for proj in projs] over the last axis, x
    (B, L, in_features), as one matmul: the one ``F.linear`` runs on a contiguous x. (The
    weights go in as one contiguous (in_features, P out_features) matrix: given a transposed
    view, ``torch.mm`` with ``out`` copies an operand on every call.)"""
    weight = torch.cat([p.weight.t() for p in projs], dim=1)
    x = x.reshape(-1, x.shape[-1])
    if projs[0].bias is None:
        return torch.mm(x, weight, out=out)
    return torch.addmm(torch.cat([p.bias for p in projs]), x, weight, out=out)


def _project_out(
    y: torch.Tensor, out_projs: Sequence[nn.Linear], strategy: str, directions: int
) -> torch.Tensor:
    """y (B, L, Sy, D) -> (B, L, d_model). "add": sum_s out_proj_s(y_s), one matmul over the
    concatenated channels (Sy = 1: y is already the sum over the directions of one shared
    out_proj, whose bias then counts once per direction); "ew_multiply": the product."""
    batch, length, Sy, D = y.shape
    if strategy == "add":
        bias = None
        if out_projs[0].bias is not None:
            bias = sum(p.bias for p in out_projs) * (directions // len(out_projs))
        weight = torch.cat([p.weight for p in out_projs], dim=1)  # (d_model, Sy D)
        return F.linear(y.view(batch, length, Sy * D), weight, bias)
    first, last = out_projs[0], out_projs[-1]
    return first(y[:, :, 0]) * last(y[:, :, 1])


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


#: Ranges of ``init_mamba_weights``' keywords, a backbone's ``initializer_cfg`` keys.
INIT_MAMBA_RANGES = {"initializer_range": ">=0", "n_residuals_per_layer": ">=1"}


@torch.no_grad()
def init_mamba_weights(
    model: nn.Module,
    n_layer: int,
    initializer_range: float = 0.02,
    rescale_prenorm_residual: bool = True,
    n_residuals_per_layer: int = 1,
) -> None:
    """The initialisation of mamba_ssm's and Caduceus' ``_init_weights`` (``initializer_cfg``
    of MambaLM and Caduceus): embeddings N(0, initializer_range), Linear biases zero (except
    those marked ``_no_reinit``: dt_proj's), each Mamba mixer's out_proj re-drawn (PyTorch's
    default) and scaled by 1/sqrt(n_residuals_per_layer * n_layer) (GPT-2)."""
    for module in model.modules():
        if isinstance(module, nn.Linear) and module.bias is not None:
            if not getattr(module.bias, "_no_reinit", False):
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=initializer_range)
        if rescale_prenorm_residual and isinstance(module, Mamba) and module.out_proj is not None:
            nn.init.kaiming_uniform_(module.out_proj.weight, a=math.sqrt(5))
            module.out_proj.weight /= math.sqrt(n_residuals_per_layer * n_layer)
