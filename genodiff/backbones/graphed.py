"""A backbone's network call, or a sampler's whole step, replayed from CUDA graphs: sampling
off the kernel-launch floor.

A sampler calls the network once per step on inputs of one shape. On a GPU a small model's
call is bound by launching its hundreds of kernels, not by their arithmetic (BENCHMARKS.md,
"The CUDA kernels against the CPU path"). A CUDA graph records the launches of one call once
and replays them with a single launch. ``GraphedNetwork`` wraps a backbone so that each
distinct input signature (shapes, dtypes, devices of ids, sigma and labels; the autocast
state) is recorded on its first call and replayed after: the inputs are copied into the
recording's own tensors, the graph replays, and the output is copied out, so a replay returns
what the eager call returns on the same inputs.

Calls a graph cannot serve run eagerly, with the same result: embeddings instead of ids
(Plaid), gradients on, training mode, more signatures than ``max_graphs`` (an AR model's
growing context), and a backbone whose call cannot be recorded (a host sync inside it: it is
said once, as a warning). ``genodiff.pipeline.Model.enable_cuda_graphs`` and
``genodiff sample --cuda-graphs`` turn it on.

``GraphedNetwork.call`` replays any pure function of tensors the same way. The masked samplers
use it to replay their whole sync-free step -- network and sampler arithmetic, one graph per
(rows, length, sampler settings) -- when handed a ``GraphedNetwork``, except with a
classifier, whose steps keep the network call alone replayed
(``genodiff.samplers.masked.whole_step_graphs``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from genodiff.conditioning import network_kwargs
from genodiff.user_warnings import warn_user

#: Records ``call`` (no arguments, reading fixed input tensors) and returns its replay, which
#: reruns the recording and returns its output tensor(s) (the same ones at every replay).
Capture = Callable[[Callable[[], Any]], Callable[[], Any]]

WARM_UP_CALLS = 3  # before recording: lazy initialisation, kernel autotuning, the allocator


def cuda_graph_capture(call: Callable[[], Any], pool: Any = None) -> Callable[[], Any]:
    """``call`` recorded as a CUDA graph on the current device (after warm-up calls on a side
    stream, as torch.cuda.graph requires); ``pool``: a memory pool shared between graphs."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARM_UP_CALLS):
            call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        output = call()

    def replay() -> Any:
        graph.replay()
        return output

    return replay


def shared_pool_capture() -> Capture:
    """``cuda_graph_capture`` with one memory pool for all the graphs it records."""
    pool = torch.cuda.graph_pool_handle()
    return lambda call: cuda_graph_capture(call, pool)


#: What a recorded call returns: one tensor, or a tuple of them.
Outputs = Tensor | tuple[Tensor, ...]


@dataclass
class _Recording:
    inputs: tuple[Tensor | None, ...]  # the tensors the recording reads
    replay: Callable[[], Outputs]


def _signature(inputs: tuple[Tensor | None, ...]) -> tuple:
    """What a recording is valid for: each input's shape, dtype and device, and autocast."""
    tensors = tuple(None if t is None else (tuple(t.shape), t.dtype, t.device) for t in inputs)
    device_type = inputs[0].device.type
    autocast = torch.is_autocast_enabled(device_type)
    return (*tensors, autocast and torch.get_autocast_dtype(device_type))


def _copied(outputs: Outputs) -> Outputs:
    """``outputs`` copied out of the recording's tensors, which the next replay overwrites."""
    if isinstance(outputs, Tensor):
        return outputs.clone()
    return tuple(output.clone() for output in outputs)


class GraphedNetwork(nn.Module):
    """``network`` (a backbone: ``forward(ids, sigma, inputs_embeds, labels=...)``) with its
    inference calls replayed from recordings (module doc). ``capture`` records one call
    (``cuda_graph_capture`` by default); ``max_graphs`` bounds how many signatures are recorded,
    whole sampler steps (``call``) included. Every other attribute (``capabilities``, ``step``,
    ...) is the network's."""

    def __init__(
        self, network: nn.Module, capture: Capture | None = None, max_graphs: int = 8
    ) -> None:
        super().__init__()
        self.network = network
        self.capabilities = network.capabilities
        self.max_graphs = max_graphs
        self._capture = capture
        self._recordings: dict[tuple, _Recording | None] = {}  # None: runs eagerly
        self._warned = False

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "network":
                raise
            return getattr(self.network, name)

    def forward(
        self,
        input_ids: Tensor | None,
        sigma: Tensor | None = None,
        inputs_embeds: Tensor | None = None,
        labels: Tensor | None = None,
    ) -> Tensor:
        eager = inputs_embeds is not None or input_ids is None  # Plaid's call: embeddings
        if eager or self.network.training:
            kwargs = network_kwargs(labels)
            if inputs_embeds is not None:
                kwargs["inputs_embeds"] = inputs_embeds
            return self.network(input_ids, sigma, **kwargs)
        # (B, L), (B,) or None, (B,) or None
        return self.call("network", self._network_call, input_ids, sigma, labels)

    def _network_call(self, ids: Tensor, sigma: Tensor | None, labels: Tensor | None) -> Tensor:
        return self.network(ids, sigma, **network_kwargs(labels))

    def call(self, key: Hashable, fn: Callable[..., Outputs], *inputs: Tensor | None) -> Outputs:
        """``fn(*inputs)`` (a pure function of its tensor inputs and of what ``key`` stands
        for: any constant it holds must be part of the key) replayed from the recording of
        (``key``, the inputs' signature), made on its first call while fewer than
        ``max_graphs`` exist: the inputs are copied into the recording's own tensors, the
        recording replays, and its outputs are copied out. Where no recording serves (with
        gradients on, too), ``fn`` runs eagerly: the same result. How a sampler's whole step is
        replayed (``genodiff.samplers.masked``)."""
        if torch.is_grad_enabled():  # a training-style call is never replayed
            return fn(*inputs)
        key = (key, _signature(inputs))
        if key not in self._recordings:
            recorded = len(self._recordings) < self.max_graphs
            self._recordings[key] = self._record(fn, inputs) if recorded else None
        recording = self._recordings[key]
        if recording is None:
            return fn(*inputs)
        for held, given in zip(recording.inputs, inputs, strict=True):
            if held is not None:
                held.copy_(given)
        return _copied(recording.replay())

    def _record(
        self, fn: Callable[..., Outputs], inputs: tuple[Tensor | None, ...]
    ) -> _Recording | None:
        """A recording of ``fn`` on copies of ``inputs``; None (and a warning, once) when the
        call cannot be recorded."""
        if self._capture is None:
            self._capture = shared_pool_capture()
        held = tuple(None if t is None else t.clone() for t in inputs)
        try:
            replay = self._capture(lambda: fn(*held))
        except RuntimeError as err:
            if not self._warned:
                warn_user(
                    f"{type(self.network).__name__}'s call cannot be recorded as a CUDA graph "
                    f"({str(err).splitlines()[0]}); it runs without graphs"
                )
                self._warned = True
            return None
        return _Recording(held, replay)
