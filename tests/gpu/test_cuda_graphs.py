"""The sampler's network call replayed from CUDA graphs (``genodiff.backbones.graphed``) draws
exactly the eager sequences on a GPU.

Needs only a CUDA GPU: the calls run through mamba-ssm's kernels where they are installed
(``kernels``) and through genodiff's PyTorch path in any case (``pytorch``: the kernels are
hidden from the dispatch), so a GPU machine without the kernel builds still checks the graphs.

    python -m pytest -q tests/gpu/test_cuda_graphs.py
"""

from __future__ import annotations

import pytest
import torch

from genodiff.backbones import build
from genodiff.backbones.graphed import GraphedNetwork
from genodiff.ops import upstream
from genodiff.randomness.noise import Noise
from genodiff.randomness.staging import DEPTH
from tests import guided
from tests.dna_objectives import DNA, mdlm

if not torch.cuda.is_available():
    pytest.skip("tests/gpu needs a CUDA GPU", allow_module_level=True)

CUDA = torch.device("cuda")
KERNELS_INSTALLED = upstream.upstream(upstream.SELECTIVE_SCAN, torch.zeros(1, device=CUDA))


@pytest.fixture(params=["pytorch", "kernels"])
def dispatch(request, monkeypatch):
    """Which code the backbone's calls run: the PyTorch path, or mamba-ssm's kernels."""
    if request.param == "kernels" and KERNELS_INSTALLED is None:
        pytest.skip("mamba-ssm with its CUDA kernels is not installed")
    if request.param == "pytorch":
        monkeypatch.setattr(upstream, "importable", lambda module, name: None)
    return request.param


@pytest.mark.parametrize("sampler", ["ancestral", "cached", "first-hitting"])
def test_cuda_graphs_draw_the_eager_sequences(dispatch, sampler):
    """Each whole sync-free step (network -- D-CFG's label and null parts as one doubled batch
    -- and sampler arithmetic) replayed from a CUDA graph draws exactly the eager sequences;
    every signature up to ``max_graphs`` was recorded (none fell back to eager because its
    call could not be recorded)."""
    torch.manual_seed(0)
    # built from its config, as a checkpoint is: D-CFG's two parts then come from one call
    model = build(name="caduceus", d_model=32, n_layer=2, vocab_size=12, num_classes=2)
    with torch.no_grad():
        model.backbone.label_embedding.embedding.weight.normal_(0, 2.0)
    model = model.eval().to(CUDA)
    objective = mdlm(sample_ids=DNA.sample_ids)
    request = guided.request(8, 64, steps=32, sampler=sampler, label=1, guidance=2.0)

    def draw(network: torch.nn.Module) -> torch.Tensor:
        generator = torch.Generator(device=CUDA).manual_seed(0)
        return objective.sample(network, request, generator).cpu()

    graphed = GraphedNetwork(model)
    eager = draw(model)
    assert torch.isin(eager, torch.tensor(DNA.sample_ids)).all()
    assert torch.equal(draw(graphed), eager)
    recorded = [key for key, r in graphed._recordings.items() if r is not None]
    assert len(recorded) == min(len(graphed._recordings), graphed.max_graphs)
    kind, signature = recorded[0]  # the whole sync-free step, of the 8 rows
    assert kind[0] == ("first-hitting step" if sampler == "first-hitting" else "masked step")
    assert signature[0][0] == (8, 64)


def test_per_sequence_numbers_reach_the_device_unchanged():
    """The staged, asynchronous copies (genodiff.randomness.staging) deliver each step's draws
    as the CPU makes them, for more steps than the ring has buffers."""
    on_gpu = Noise.per_sequence(4, range(6), CUDA)
    on_cpu = Noise.per_sequence(4, range(6), "cpu")
    sent = [on_gpu.uniform(6, 2, 1000) for _ in range(3 * DEPTH)]
    for draw in sent:  # read after all were sent: no copy may have read a reused buffer
        assert torch.equal(draw.cpu(), on_cpu.uniform(6, 2, 1000))
