"""Numba kernels for the selective scan on CPU, parallel over (batch, channel) rows.

Layout shared with ``_scan_torch`` (prepared by ``selective_scan.py``), all C-contiguous in one
float dtype (float32, or float64 for float64 inputs):
    u, delta, z: (Bsz, D, L); A: (D, N); D_skip, bias: (D,)
    Bk, Ck: (Bb, G, Lb, N) -- variable (Bsz, 1, L, N), grouped (Bsz, G, L, N), or constant
            (1, D, 1, N). Channel d reads group d // (D // G); Bb == 1 / Lb == 1 broadcast.
Nothing of size (Bsz, D, L, N) is ever allocated: the backward recomputes one row's states
(and exp(delta A)) into (L, N) buffers owned by the thread and runs the reverse-time recurrence
on them.

The one-pass inference mixer (``mixer_conv`` / ``mixer_scan``, no backward) works in the
(Bsz, L, channels) layout its projections produce, on S <= 2 directions (the second runs
backwards in time): xz (Bsz, L, P, 2D) in-projections, u (S, Bsz, L, D), x_dbl
(S, Bsz, L, R + 2N), dt_weight (S, D, R), A (S, D, N), D_skip, bias (S, D) -> y
(Bsz, L, S or 1, D).

Speed: the state dimension N is innermost and contiguous, so LLVM vectorises each time step
over it; exp, softplus and sigmoid are written in arithmetic (``_float_functions``) because
libm's do not vectorise (and numba's SVML path needs an SVML-patched llvmlite). Softplus and
the silu gate (and their derivatives) run in per-row vectorised loops over t inside the
kernels, so no (Bsz, D, L) temporaries are made in PyTorch. The inference scan's decay
factor exp(dt A) is ``_decay``: 2^(dt A log2 e) with A log2 e computed once per call, and its
constants passed in as an array (see ``_decay``). The inference kernels ask for 512-bit vectors
where the CPU has them (``_prefer_wide_vectors``), with the same results bit for bit.
"""

from __future__ import annotations

import math
import sys
import types as types_module

import numba
import numpy as np
import torch
from numba import njit, prange, types
from numba.extending import intrinsic, overload
from numba.np.unsafe.ndarray import to_fixed_tuple

from genodiff.progress import is_main_process
from genodiff.resources import installed_from_wheel, user_cache_folder

NumbaError = numba.core.errors.NumbaError

# reassoc lets LLVM vectorise the sums over N; contract fuses multiply-adds.
_FASTMATH = {"reassoc", "contract"}


@intrinsic
def _bits_as_float(typingctx, bits):
    """Reinterpret int32 / int64 bits as float32 / float64."""
    float_type = {types.int32: types.float32, types.int64: types.float64}.get(bits)
    if float_type is None:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(float_type))

    return float_type(bits), codegen


#: The LLVM function attribute that lets a function's loops use 512-bit vectors (see below).
WIDE_VECTORS = '"prefer-vector-width"="512"'


@intrinsic
def _prefer_wide_vectors(typingctx):
    """Let LLVM vectorise the function this is called in (a ``prange`` body: the function
    numba outlines for it) with 512-bit vectors where the CPU has them (AVX-512). LLVM's
    tuning for recent Intel server CPUs prefers 256-bit vectors, to spare the clock cycles of
    code with a few wide instructions; the inference kernels' loops are bound by arithmetic on
    independent channels (the scan's decay polynomial), and ran 1.4x (scan) and 1.2x (conv)
    faster with 512-bit vectors (BENCHMARKS.md). Each channel's arithmetic is the same at any
    vector width (no sum crosses lanes), so the results are bit for bit those of 256-bit
    vectors (tests/test_selective_scan.py). Not for the training kernels: the forward's sums
    over N cross lanes (they would round differently) and it ran 1.4x slower. llvmlite's
    attribute set takes only LLVM's keyword attributes, so the string attribute goes in as a
    set element; LLVM ignores it on a CPU without AVX-512. Emits no code."""

    def codegen(context, builder, signature, args):
        attributes = builder.function.attributes
        if isinstance(attributes, set):  # llvmlite's layout; else LLVM's own width, same results
            set.add(attributes, WIDE_VECTORS)
        return context.get_dummy_value()

    return types.none(), codegen


@intrinsic
def _default_vectors(typingctx):
    """``_prefer_wide_vectors``' stand-in in ``with_default_vectors``: emits nothing."""
    return types.none(), lambda context, builder, signature, args: context.get_dummy_value()


def with_default_vectors(kernel):
    """A fresh compile of ``kernel`` (a dispatcher here) without ``_prefer_wide_vectors``:
    LLVM's own vector width. For the tests and benchmarks that compare the two."""
    py_func = kernel.py_func
    namespace = {**py_func.__globals__, "_prefer_wide_vectors": _default_vectors}
    plain = types_module.FunctionType(py_func.__code__, namespace, py_func.__name__)
    return njit(**fresh_options(kernel))(plain)


def fresh_options(kernel) -> dict:
    """The options ``kernel`` (a dispatcher here) was compiled with, for another ``njit``."""
    return {k: v for k, v in kernel.targetoptions.items() if k != "nopython"}


def _float_functions(ftype, itype, mantissa_bits, exp_bias, lo, hi, ln2, degree, atanh_terms):
    """exp, softplus and sigmoid for one float type, written in
    arithmetic and selects only so that loops over them vectorise (libm's exp does not).

    exp: x = k ln2 + r with |r| <= ln2 / 2 (ln2 split in two for an exact k ln2), exp(r) by its
    Taylor polynomial of ``degree`` (error < 1 ulp), times 2^k from exponent bits; results below
    the smallest normal float flush to 0. softplus (linear past 20, as torch): max(x, 0) +
    log1p(e), e = exp(-|x|) in (0, 1], with log1p(e) = 2 atanh(s), s = e / (2 + e) <= 1/3."""
    log2e, half, one, two = ftype(1 / math.log(2)), ftype(0.5), ftype(1), ftype(2)
    lo, hi, zero, inf, twenty = ftype(lo), ftype(hi), ftype(0), ftype(np.inf), ftype(20)
    ln2_hi = ftype(round(ln2[0] * 2**12) / 2**12)  # k * ln2_hi is exact for |k| < 2^11
    ln2_lo = ftype(ln2[0] - float(ln2_hi) + ln2[1])
    # 2 exp(r) = sum 2 r^i / i!, times 2^(k - 1): stays a normal float for k in [-125, 128]
    exp_coefs = tuple(ftype(2 / math.factorial(i)) for i in range(degree, -1, -1))
    atanh_coefs = tuple(ftype(2 / (2 * i + 1)) for i in range(atanh_terms - 1, -1, -1))
    bias, scale = ftype(exp_bias - 1), ftype(2**mantissa_bits)

    def exp(x):
        xc = min(max(x, lo), hi)
        k = np.floor(xc * log2e + half)
        r = (xc - k * ln2_hi) - k * ln2_lo
        p = exp_coefs[0]
        for c in exp_coefs[1:]:
            p = p * r + c
        res = p * _bits_as_float(itype((k + bias) * scale))
        res = inf if x > hi else res
        res = zero if x < lo else res
        return res if x == x else x  # NaN stays NaN

    def softplus(x):
        e = _exp(-abs(x))
        s = e / (two + e)
        s2 = s * s
        p = atanh_coefs[0]
        for c in atanh_coefs[1:]:
            p = p * s2 + c
        return x if x > twenty else max(x, zero) + s * p

    def sigmoid(x):
        return one / (one + _exp(-x))

    return {
        "exp": exp,
        "softplus": softplus,
        "sigmoid": sigmoid,
    }


_LN2 = (0.6931471805599453, 2.3190468138462996e-17)  # ln 2 = sum, in float64 parts
_F32 = _float_functions(np.float32, np.int32, 23, 127, -86.6, 88.72283, _LN2, 7, 8)
_F64 = _float_functions(np.float64, np.int64, 52, 1023, -707.7, 709.782712893384, _LN2, 13, 17)


def _float_function(name):
    """A function callable from numba kernels on float32 / float64 scalars (see above)."""

    def stub(x):
        raise TypeError(f"{name} is only callable inside numba-compiled kernels")

    # compiled without reassoc, which could undo the exact ln2 split
    @overload(stub, jit_options={"fastmath": {"contract"}})
    def _(x):
        return {types.float32: _F32[name], types.float64: _F64[name]}.get(x)

    return stub


_exp, _softplus, _sigmoid = map(_float_function, ("exp", "softplus", "sigmoid"))


def _exp2_chebyshev(degree: int) -> np.ndarray:
    """Power-basis coefficients (lowest first) of the Chebyshev interpolant of 2^f on
    [-1/2, 1/2]: near-minimax, relative error 2e-9 at degree 6 (float32: 0.9 ulp with
    rounding, where Taylor needs degree 7). The conversion to powers loses ~4 bits at degree
    12-13, so float64 takes Taylor's coefficients instead."""
    cheb = np.polynomial.Chebyshev.interpolate(np.exp2, degree, domain=[-0.5, 0.5])
    return cheb.convert(kind=np.polynomial.Polynomial).coef


def _exp2_taylor(degree: int) -> np.ndarray:
    """(ln 2)^i / i!, i = 0..degree: 2^f = e^(f ln 2) to 4e-18 relative at degree 13."""
    return np.array([math.log(2) ** i / math.factorial(i) for i in range(degree + 1)])


def _decay_constants(ftype, mantissa_bits: int, exp_bias: int, coefs: np.ndarray) -> np.ndarray:
    """The constants of ``_decay`` for one float type: [lo, 1/2, exponent bias,
    2^mantissa_bits, then the coefficients of the polynomial for 2^f on [-1/2, 1/2], highest
    degree first]; lo = the smallest normal exponent."""
    return np.array([1 - exp_bias, 0.5, exp_bias, 2.0**mantissa_bits, *coefs[::-1]], dtype=ftype)


_DECAY_CONSTANTS = {
    np.dtype(np.float32): _decay_constants(np.float32, 23, 127, _exp2_chebyshev(6)),
    np.dtype(np.float64): _decay_constants(np.float64, 52, 1023, _exp2_taylor(13)),
}


def _decay(x, k):
    """2^x for x <= 0 (the decay exp(dt A) = 2^(dt A log2 e) of the inference scan), given
    k = ``_decay_tuple`` of the type's ``_DECAY_CONSTANTS``: 2^x = 2^n p(x - n) with n the
    nearest integer, p the polynomial; x below the smallest normal exponent gives that power
    of 2 (a negligible factor, never a denormal); NaN stays NaN. Within 1 ulp of 2^x (the
    test allows 2). The constants are values the kernel reads from an array, not literals:
    LLVM keeps them in registers, where it folds a literal into every use as a load from
    memory (the scan's inner loop then ran load-bound, 20% slower)."""
    raise TypeError("_decay is only callable inside numba-compiled kernels")


def _decay_for(itype):
    def decay(x, k):
        lo, half, bias, scale = k[0], k[1], k[2], k[3]
        xc = lo if x < lo else x  # NaN passes through (the comparison is false)
        n = np.floor(xc + half)
        f = xc - n
        p = k[4]
        for c in k[5:]:
            p = p * f + c
        return p * _bits_as_float(itype((n + bias) * scale))

    return decay


# compiled without reassoc, like the float functions above
@overload(_decay, jit_options={"fastmath": {"contract"}})
def _(x, k):
    itype = {types.float32: np.int32, types.float64: np.int64}.get(x)
    return None if itype is None else _decay_for(itype)


def _decay_tuple(constants):
    """``_DECAY_CONSTANTS[dtype]`` (an array) as a tuple of its values, inside kernels."""
    raise TypeError("_decay_tuple is only callable inside numba-compiled kernels")


@overload(_decay_tuple)
def _(constants):
    dtype = getattr(constants, "dtype", None)
    if dtype not in (types.float32, types.float64):
        return None
    size = len(_DECAY_CONSTANTS[np.dtype(str(dtype))])
    return lambda constants: to_fixed_tuple(constants, size)


@njit(inline="always")
def _rows(Xk, b, d, D):
    """The (Lb, N) rows of B or C that channel d of batch b reads."""
    return Xk[b if Xk.shape[0] > 1 else 0, d // (D // Xk.shape[1])]


@njit(inline="always", fastmath=_FASTMATH)
def _discretize_row(delta_row, bias_d, softplus, dt_row):
    """dt_row (L,) = softplus(delta + bias) (just delta + bias without softplus)."""
    for t in range(delta_row.shape[0]):
        dt_row[t] = _softplus(delta_row[t] + bias_d) if softplus else delta_row[t] + bias_d


@njit(parallel=True, fastmath=_FASTMATH)
def _forward_kernel(u, delta, A, Bk, Ck, D_skip, z, bias, softplus, has_z, out, last):
    """out (Bsz, D, L) = (<C_t, h_t> + D u_t) (* silu(z_t)), last (Bsz, D, N) = h_L."""
    Bsz, D, L = u.shape
    N = A.shape[1]
    for row in prange(Bsz * D):
        b, d = row // D, row % D
        Arow, Brow, Crow = A[d], _rows(Bk, b, d, D), _rows(Ck, b, d, D)
        dt_row, y_row = np.empty(L, dtype=u.dtype), out[b, d]
        _discretize_row(delta[b, d], bias[d], softplus, dt_row)
        h = np.zeros(N, dtype=u.dtype)
        for t in range(L):
            Bt, Ct = Brow[t if Brow.shape[0] > 1 else 0], Crow[t if Crow.shape[0] > 1 else 0]
            dt_t, u_t = dt_row[t], u[b, d, t]
            dtu = dt_t * u_t
            acc = u.dtype.type(0)
            for n in range(N):
                h[n] = _exp(dt_t * Arow[n]) * h[n] + dtu * Bt[n]
                acc += Ct[n] * h[n]
            y_row[t] = acc + D_skip[d] * u_t
        if has_z:
            for t in range(L):
                y_row[t] *= z[b, d, t] * _sigmoid(z[b, d, t])
        last[b, d] = h


@njit(inline="always", fastmath=_FASTMATH)
def _gate_grad_rows(dout_row, z_row, has_z, sz_row, dy_row):
    """sz_row = sigmoid(z), dy_row = dLoss / d(ungated y) = dout silu(z) (just dout without z);
    (L,) each."""
    if has_z:
        for t in range(dout_row.shape[0]):
            sz_row[t] = _sigmoid(z_row[t])
        for t in range(dout_row.shape[0]):
            dy_row[t] = dout_row[t] * z_row[t] * sz_row[t]
    else:
        dy_row[:] = dout_row


@njit(inline="always", fastmath=_FASTMATH)
def _exp_rows(dt_row, Arow, dAs):
    """dAs[t] = exp(dt_t A) (L, N)."""
    for t in range(dt_row.shape[0]):
        for n in range(Arow.shape[0]):
            dAs[t, n] = _exp(dt_row[t] * Arow[n])


@njit(inline="always", fastmath=_FASTMATH)
def _row_states(dtu_row, Brow, Crow, dAs, hs, y_row):
    """hs[t + 1] = h_t = dAs[t] h_{t-1} + dtu_t B_t (hs (L + 1, N), hs[0] = 0);
    y_row[t] = <C_t, h_t>."""
    hs[0] = 0.0
    for t in range(dtu_row.shape[0]):
        Bt, Ct = Brow[t if Brow.shape[0] > 1 else 0], Crow[t if Crow.shape[0] > 1 else 0]
        dtu, acc = dtu_row[t], hs.dtype.type(0)
        for n in range(hs.shape[1]):
            h = dAs[t, n] * hs[t, n] + dtu * Bt[n]
            hs[t + 1, n] = h
            acc += Ct[n] * h
        y_row[t] = acc


@njit(inline="always", fastmath=_FASTMATH)
def _state_grads(Crow, dy_row, dAs, gs):
    """gs[t] = dLoss / dh_t (L, N): g_t = g_{t+1} exp(dt_{t+1} A) + C_t dy_t, g_L = 0."""
    L, N = dy_row.shape[0], gs.shape[1]
    for t in range(L - 1, -1, -1):
        Ct, dy_t = Crow[t if Crow.shape[0] > 1 else 0], dy_row[t]
        if t == L - 1:
            for n in range(N):
                gs[t, n] = Ct[n] * dy_t
        else:
            for n in range(N):
                gs[t, n] = gs[t + 1, n] * dAs[t + 1, n] + Ct[n] * dy_t


@njit(inline="always", fastmath=_FASTMATH)
def _a_grads(hs, gs, dt_row, Arow, dAs, dArow, gA_row):
    """x_t = dLoss / d(dt_t A) = g_t h_{t-1} exp(dt_t A) (overwrites dAs, (L, N));
    dArow (N,) += sum_t x_t dt_t; gA_row[t] = <x_t, A>."""
    for t in range(gs.shape[0]):
        dt_t, gA = dt_row[t], gs.dtype.type(0)
        for n in range(gs.shape[1]):
            x = dAs[t, n] * gs[t, n] * hs[t, n]
            dAs[t, n] = x
            dArow[n] += x * dt_t
            gA += x * Arow[n]
        gA_row[t] = gA


@njit(inline="always", fastmath=_FASTMATH)
def _b_grads(Brow, gs, dtu_row, dBrow, gB_row):
    """dBrow[t] += dtu_t g_t; gB_row[t] = <B_t, g_t>; B, dB (Lb, N), Lb == 1 broadcasts."""
    for t in range(gs.shape[0]):
        tb = t if Brow.shape[0] > 1 else 0
        Bt, dBt, dtu, gB = Brow[tb], dBrow[tb], dtu_row[t], gs.dtype.type(0)
        for n in range(gs.shape[1]):
            gB += Bt[n] * gs[t, n]
            dBt[n] += dtu * gs[t, n]
        gB_row[t] = gB


@njit(inline="always", fastmath=_FASTMATH)
def _c_grads(dy_row, hs, dCrow):
    """dCrow[t] += dy_t h_t = dy_t hs[t + 1]; dC (Lc, N), Lc == 1 sums over t."""
    for t in range(dy_row.shape[0]):
        dCt, dy_t = dCrow[t if dCrow.shape[0] > 1 else 0], dy_row[t]
        for n in range(hs.shape[1]):
            dCt[n] += dy_t * hs[t + 1, n]


@njit(parallel=True, fastmath=_FASTMATH)
def _backward_kernel(
    dout, u, delta, A, Bk, Ck, D_skip, z, bias, softplus, has_z, n_chunks,
    du, ddelta, dz, dA_part, dB_part, dC_part, dD_part, dbias_part,
):  # fmt: skip
    """Work item (b, chunk of channels). Partial buffers make every write race-free:
    dA/dD/dbias_part are indexed by b; dB/dC_part by a slot unique among work items that can
    touch the same (Bb, G) entry (the chunk, times b when B/C are shared over the batch).
    Each row runs in short passes over (L, N) buffers (exp(dt A), states, the reverse recurrence
    of the state gradient, then the gradients of C, B and A), each storing to one or two
    arrays: LLVM vectorises such loops over N well, where one fused loop ran mostly scalar."""
    Bsz, D, L = u.shape
    N = A.shape[1]
    chunk = (D + n_chunks - 1) // n_chunks
    for item in prange(Bsz * n_chunks):
        b, p = item // n_chunks, item % n_chunks
        sB = p if Bk.shape[0] > 1 else p + n_chunks * b
        sC = p if Ck.shape[0] > 1 else p + n_chunks * b
        hs = np.empty((L + 1, N), dtype=u.dtype)  # hs[t + 1] = h_t
        dAs = np.empty((L, N), dtype=u.dtype)  # exp(dt_t A), then dLoss / d(dt_t A)
        gs = np.empty((L, N), dtype=u.dtype)  # dLoss / dh_t
        dArow = np.empty(N, dtype=u.dtype)
        rows = np.empty((7, L), dtype=u.dtype)
        dt_row, dy_row, sz_row, y_row, dtu_row, gA_row, gB_row = rows
        for d in range(p * chunk, min(D, (p + 1) * chunk)):
            Arow, Brow, Crow = A[d], _rows(Bk, b, d, D), _rows(Ck, b, d, D)
            _discretize_row(delta[b, d], bias[d], softplus, dt_row)
            _gate_grad_rows(dout[b, d], z[b, d], has_z, sz_row, dy_row)
            for t in range(L):
                dtu_row[t] = dt_row[t] * u[b, d, t]
            _exp_rows(dt_row, Arow, dAs)
            _row_states(dtu_row, Brow, Crow, dAs, hs, y_row)
            _state_grads(Crow, dy_row, dAs, gs)
            _c_grads(dy_row, hs, _rows(dC_part[sC], b, d, D))
            _b_grads(Brow, gs, dtu_row, _rows(dB_part[sB], b, d, D), gB_row)
            dArow[:] = 0.0
            _a_grads(hs, gs, dt_row, Arow, dAs, dArow, gA_row)
            dA_part[b, d] = dArow
            dD_acc, dbias_acc = u.dtype.type(0), u.dtype.type(0)
            for t in range(L):
                du[b, d, t] = dy_row[t] * D_skip[d] + dt_row[t] * gB_row[t]
                dD_acc += dy_row[t] * u[b, d, t]
            for t in range(L):  # dLoss / d dt, times softplus' derivative
                raw = delta[b, d, t] + bias[d]
                ddt = gA_row[t] + u[b, d, t] * gB_row[t]
                ddelta[b, d, t] = ddt * _sigmoid(raw) if softplus and raw <= 20 else ddt
                dbias_acc += ddelta[b, d, t]
            if has_z:
                for t in range(L):
                    y_t = y_row[t] + D_skip[d] * u[b, d, t]
                    sz = sz_row[t]
                    dz[b, d, t] = dout[b, d, t] * y_t * sz * (1 + z[b, d, t] * (1 - sz))
            dD_part[b, d] = dD_acc
            dbias_part[b, d] = dbias_acc


@njit(parallel=True, fastmath=_FASTMATH)
def _mixer_conv_kernel(xz, weight_t, bias, out):
    """out[s, b, t] = silu(bias[s] + sum_k weight_t[s, k] * x[b, t - K + 1 + k]) for s = 0 and
    x[b, t + K - 1 - k] for s = 1 (the causal conv of the flipped sequence, flipped back);
    zeros outside [0, L). x = xz[b, :, p, :D] with p = s for two projections, else 0."""
    S, Bsz, L, D = out.shape
    K, P = weight_t.shape[1], xz.shape[2]
    for item in prange(S * Bsz):
        _prefer_wide_vectors()
        s, b = item // Bsz, item % Bsz
        p = min(s, P - 1)
        for t in range(L):
            row = out[s, b, t]
            row[:] = bias[s]
            for k in range(K):
                src = t - K + 1 + k if s == 0 else t + K - 1 - k
                if 0 <= src < L:
                    x_row, w_row = xz[b, src, p], weight_t[s, k]
                    for d in range(D):
                        row[d] += w_row[d] * x_row[d]
            for d in range(D):
                row[d] *= _sigmoid(row[d])


@njit(inline="always", fastmath=_FASTMATH)
def _step_rows(dt_in, dt_weight, d0, bias_row, u_row, dt, dtu):
    """Per channel j of a chunk at one t: dt = softplus(<dt_in, dt_weight[:, d0 + j]> + bias)
    (dt_proj: dt_in (R,), dt_weight (R, D) its weight transposed), dtu = dt u; (W,) each."""
    W = dt.shape[0]
    dt[:] = bias_row
    for r in range(dt_weight.shape[0]):
        x_r, w_r = dt_in[r], dt_weight[r, d0 : d0 + W]
        for j in range(W):
            dt[j] += x_r * w_r[j]
    for j in range(W):
        dt[j] = _softplus(dt[j])
        dtu[j] = dt[j] * u_row[j]


@njit(inline="always", fastmath=_FASTMATH)
def _state_step(At2, d0, BC, dt, dtu, h, acc, k):
    """acc = sum_n C_t[n] h[n] after h[n] <- exp(dt A[n]) h[n] + dtu B_t[n]: h (N, W); At2
    (N, D) = A log2(e) transposed, read at channels d0 : d0 + W; BC (2N,) = [B_t, C_t]; dt,
    dtu, acc (W,). The loops over the W channels are contiguous and vectorise. exp(dt A) is
    ``_decay(dt A log2 e, k)``: dt >= 0 (a softplus) and A < 0 (-exp(A_log)) in a mixer."""
    N, W = h.shape
    acc[:] = 0.0
    for n in range(N):
        h_n, A_n, B_n, C_n = h[n], At2[n, d0 : d0 + W], BC[n], BC[N + n]
        for j in range(W):
            h_j = _decay(dt[j] * A_n[j], k) * h_n[j] + dtu[j] * B_n
            h_n[j] = h_j
            acc[j] += C_n * h_j


@njit(inline="always", fastmath=_FASTMATH)
def _output_row(acc, D_row, u_row, z_row, gated, add, y_row):
    """y_row = (acc + D u) (* silu(z) when ``gated``) (+ y_row when ``add``); (W,) each."""
    for j in range(y_row.shape[0]):
        out = acc[j] + D_row[j] * u_row[j]
        out = out + y_row[j] if add else out
        y_row[j] = out * z_row[j] * _sigmoid(z_row[j]) if gated else out


@njit(parallel=True, fastmath=_FASTMATH)
def _mixer_scan_kernel(u, x_dbl, dt_weight_t, At2, D_skip, xz, bias, decay, n_chunks, y):
    """Work item (b, chunk of W channels), both directions in turn: s = 0 scans t = 0..L-1,
    s = 1 scans t = L-1..0. y[b, t, s] = (<C_t, h_t> + D u_t) silu(z_t) for y (Bsz, L, S, D);
    for y (Bsz, L, 1, D) the directions share z (one projection) and y = (y_0 + y_1) silu(z),
    gated once after both. The item owns its channels of y at every t. dt_proj runs here, on
    the first R columns of x_dbl. Time outermost, channels innermost (At2, dt_weight_t: A log2(e)
    (S, N, D) and dt_proj's weight (S, R, D) transposed): every inner loop runs over W
    contiguous channels, where N (often 16) is too short for the vectoriser. The chunk's
    state (N, W) stays in a buffer of the thread; nothing is stored per step."""
    S, Bsz, L, D = u.shape
    N, R, P = At2.shape[1], dt_weight_t.shape[1], xz.shape[2]
    chunk = (D + n_chunks - 1) // n_chunks
    for item in prange(Bsz * n_chunks):
        _prefer_wide_vectors()
        b, c = item // n_chunks, item % n_chunks
        # the last chunks can be empty (D = 10 in 7 chunks of 2: 10..10, 12..10)
        d0, d1 = min(D, c * chunk), min(D, (c + 1) * chunk)
        k = _decay_tuple(decay)
        h = np.empty((N, d1 - d0), dtype=u.dtype)
        dt, dtu, acc = np.empty((3, d1 - d0), dtype=u.dtype)
        for s in range(S):
            p, sy = min(s, P - 1), min(s, y.shape[2] - 1)
            gated = y.shape[2] == S or s == S - 1  # own output, or the last one of the sum
            h[:] = 0.0
            for i in range(L):
                t = i if s == 0 else L - 1 - i
                u_row, x_row = u[s, b, t, d0:d1], x_dbl[s, b, t]
                _step_rows(x_row, dt_weight_t[s], d0, bias[s, d0:d1], u_row, dt, dtu)
                _state_step(At2[s], d0, x_row[R:], dt, dtu, h, acc, k)
                z_row = xz[b, t, p, D + d0 : D + d1]
                y_row = y[b, t, sy, d0:d1]
                _output_row(acc, D_skip[s, d0:d1], u_row, z_row, gated, sy != s, y_row)


def _np(x: torch.Tensor) -> np.ndarray:
    return x.detach().numpy()


def _dummy_z(u: torch.Tensor, z: torch.Tensor | None) -> torch.Tensor:
    return z if z is not None else u.new_empty(0, 0, 0)


def _follow_torch_threads() -> None:
    """Run the kernels on as many threads as torch's intra-op pool: ``torch.set_num_threads``
    bounds genodiff's CPU work as a whole (Lightning sets it to cores / processes when several
    CPU processes share a machine). Starting numba's OpenMP pool resets the OpenMP thread count
    that torch reads as its own, so torch's is put back: otherwise torch and numba each take
    every core in every process, and the processes crawl."""
    wanted = torch.get_num_threads()
    threads = max(1, min(wanted, numba.config.NUMBA_NUM_THREADS))
    if numba.get_num_threads() != threads:
        numba.set_num_threads(threads)
    if torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)


def forward(u, delta, A, Bk, Ck, D_skip, z, bias, softplus):
    """-> out (Bsz, D, L) (gated when z is given), last state (Bsz, D, N)."""
    _follow_torch_threads()
    out = torch.empty_like(u)
    last = u.new_empty(u.shape[0], u.shape[1], A.shape[1])
    args = (u, delta, A, Bk, Ck, D_skip, _dummy_z(u, z), bias)
    _forward_kernel(*map(_np, args), softplus, z is not None, _np(out), _np(last))
    return out, last


def _n_chunks(Bsz: int, D: int) -> int:
    """Channel chunks per batch row so that Bsz * chunks work items split evenly over threads."""
    threads = numba.get_num_threads()
    return max(1, min(D, threads // math.gcd(Bsz, threads)))


def backward(dout, u, delta, A, Bk, Ck, D_skip, z, bias, softplus):
    """-> du, ddelta, dA, dBk, dCk, dD, dz (None without z), dbias; dBk/dCk in Bk/Ck layout."""
    _follow_torch_threads()
    Bsz, D, _ = u.shape
    n_chunks = _n_chunks(Bsz, D)
    du, ddelta = torch.empty_like(u), torch.empty_like(u)
    dz = torch.empty_like(z) if z is not None else u.new_empty(0, 0, 0)
    dA_part = u.new_zeros(Bsz, *A.shape)
    dB_part = u.new_zeros(n_chunks * (Bsz if Bk.shape[0] == 1 else 1), *Bk.shape)
    dC_part = u.new_zeros(n_chunks * (Bsz if Ck.shape[0] == 1 else 1), *Ck.shape)
    dD_part, dbias_part = u.new_empty(Bsz, D), u.new_empty(Bsz, D)
    args = (dout, u, delta, A, Bk, Ck, D_skip, _dummy_z(u, z), bias)
    outs = (du, ddelta, dz, dA_part, dB_part, dC_part, dD_part, dbias_part)
    _backward_kernel(*map(_np, args), softplus, z is not None, n_chunks, *map(_np, outs))
    dA, dBk, dCk, dD, dbias = (x.sum(0) for x in (dA_part, dB_part, dC_part, dD_part, dbias_part))
    return du, ddelta, dA, dBk, dCk, dD, (dz if z is not None else None), dbias


def mixer_conv(xz, weight, bias, out):
    """-> out = u (S, Bsz, L, D): silu of the depthwise conv of each direction (see the
    kernel); xz (Bsz, L, P, 2D), weight (S, D, K), bias (S, D)."""
    _follow_torch_threads()
    weight_t = weight.transpose(1, 2).contiguous()  # (S, K, D)
    _mixer_conv_kernel(_np(xz), _np(weight_t), _np(bias), _np(out))
    return out


def mixer_scan(u, x_dbl, dt_weight, A, D_skip, xz, bias, summed, y):
    """-> y (Bsz, L, S, D), or (Bsz, L, 1, D) summed over directions (see the kernel)."""
    _follow_torch_threads()
    S, Bsz, L, D = u.shape
    dt_weight_t = dt_weight.transpose(1, 2).contiguous()  # (S, R, D)
    At2 = (A.double() * (1 / math.log(2))).to(A.dtype).transpose(1, 2).contiguous()  # (S, N, D)
    decay = _DECAY_CONSTANTS[np.dtype(_np(u).dtype)]
    args = (u, x_dbl, dt_weight_t, At2, D_skip, xz, bias)
    _mixer_scan_kernel(*map(_np, args), decay, _n_chunks(Bsz, D), _np(y))
    return y


class _FirstCompileNotice(numba.core.event.Listener):
    """Says once per process, on stderr, that the kernels are being compiled; in the main
    process only of a multi-process run (``--devices``), whose processes compile at once.
    numba fires "numba:compile" only when its on-disk cache (``_cache_on_disk``) has no usable
    entry: once per install (and after an upgrade) and per dtype of the weights (float32,
    bfloat16 or float64 each compile their own); later processes load the cached machine
    code."""

    def __init__(self, kernels: tuple[object, ...]) -> None:
        self.kernels = kernels
        self.said = False

    def on_start(self, event: numba.core.event.Event) -> None:
        if not self.said and event.data["dispatcher"] in self.kernels:
            self.said = True
            if is_main_process():
                print(COMPILE_NOTICE, file=sys.stderr, flush=True)

    def on_end(self, event: numba.core.event.Event) -> None:
        pass


def _cache_on_disk(kernels: tuple[numba.core.dispatcher.Dispatcher, ...]) -> None:
    """Turn on numba's on-disk cache of compiled ``kernels`` (what ``cache=True`` does). numba
    keeps it beside this file (``genodiff/ops/__pycache__``) where that folder is writable:
    right for a checkout, but an installed wheel's would sit in site-packages, where
    ``pip uninstall`` leaves it behind (see ``genodiff.resources``). There it goes to
    ``user_cache_folder("numba")`` instead, through numba's own ``NUMBA_CACHE_DIR`` setting
    (``numba.config.CACHE_DIR``), set only while these kernels' caches are made, so that other
    numba code is untouched. A ``NUMBA_CACHE_DIR`` the user set wins, as for any numba code."""
    own = str(user_cache_folder("numba")) if installed_from_wheel() else ""
    before = numba.config.CACHE_DIR
    numba.config.CACHE_DIR = before or own
    try:
        for kernel in kernels:
            kernel.enable_caching()
    finally:
        numba.config.CACHE_DIR = before


COMPILE_NOTICE = "genodiff: compiling the CPU kernels (once per install and dtype, ~20 s)"
KERNELS = (_forward_kernel, _backward_kernel, _mixer_conv_kernel, _mixer_scan_kernel)
_cache_on_disk(KERNELS)
numba.core.event.register("numba:compile", _FirstCompileNotice(KERNELS))
