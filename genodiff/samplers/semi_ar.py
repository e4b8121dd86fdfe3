"""Semi-autoregressive sampling: sequences of any length from a model trained on short windows.

Windows of ``block`` tokens advance by ``stride``: the first window [0, block) is sampled from
all-[MASK]; each next window keeps the last ``block - stride`` generated tokens as a given
prefix and samples the ``stride`` tokens after them (the last window may be shorter), until
``length`` tokens exist. Inside a window the cached ancestral sampler runs (``request.steps``
steps per window; the plain ancestral one for a time-conditioned network). Positions the
user fixed (prefix, infilling) are honoured in every window. A guided request guides every
window (a classifier, like the network, sees the window).
"""

from __future__ import annotations

from torch import Tensor, nn

from genodiff.errors import InputValueError
from genodiff.generation_config import check_block_and_stride
from genodiff.randomness.noise import Noise
from genodiff.samplers.masked import MaskedDiffusion, unmask
from genodiff.samplers.request import SampleRequest


def windows(length: int, block: int | None, stride: int | None) -> list[tuple[int, int]]:
    """The (start, end) of every window; ValueError for a missing or inconsistent block/stride.

    Window i >= 1 starts ``block - stride`` tokens before the end of window i - 1.
    """
    if block is None or stride is None:
        raise InputValueError(
            "the semi-ar sampler needs a block and a stride", parameter=("block", "stride")
        )
    check_block_and_stride(block, stride)
    spans = [(0, min(block, length))]
    while spans[-1][1] < length:
        end = spans[-1][1]
        spans.append((end - (block - stride), min(end + stride, length)))
    return spans


def semi_autoregressive(
    objective: MaskedDiffusion,
    model: nn.Module,
    request: SampleRequest,
    noise: Noise,
) -> Tensor:
    """(n, request.length) tokens window by window (see the module docstring); each window
    draws from its own branch of the rows' noise."""
    spans = windows(request.length, request.block, request.stride)
    x, given = request.canvas(objective.process.mask_id, next(model.parameters()).device)  # (n, L)
    reuse = not objective.process.time_conditioning
    done = 0  # tokens [0, done) are generated
    for index, (start, end) in enumerate(spans):
        window_given = given[:, start:end].clone()  # (n, W)
        window_given[:, : done - start] = True  # the kept tail of the previous window
        window = request.part(index, len(spans))
        x[:, start:end] = unmask(
            objective,
            model,
            x[:, start:end],
            window_given,
            window,
            noise.branch(index),
            reuse=reuse,
        )
        done = end
    return x
