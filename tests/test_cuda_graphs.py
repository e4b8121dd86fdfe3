"""Replaying the network call from recordings (genodiff.backbones.graphed) gives the eager
call's results. A CUDA graph cannot run here, so the recording is a stand-in with a graph's
semantics: it runs the call on the tensors captured at recording time and writes into one
output tensor it returns at every replay. A wrapper that forgot to copy new inputs in, or to
copy the output out before the next replay, gives wrong samples. tests/gpu runs real graphs."""

from __future__ import annotations

import warnings

import pytest
import torch

from genodiff.backbones.graphed import GraphedNetwork
from genodiff.errors import InputValueError
from tests.test_sampling_at_scale import CASES, LENGTH, MODELS


class Recorder:
    """A capture with a CUDA graph's semantics (module doc), counting what it recorded."""

    def __init__(self, fails: bool = False) -> None:
        self.recorded = 0
        self.replays = 0
        self.fails = fails

    def __call__(self, call):
        if self.fails:
            raise RuntimeError("operation not permitted when stream is capturing\nmore")
        self.recorded += 1
        output = call()  # the one output tensor, overwritten by each replay

        def replay():
            self.replays += 1
            output.copy_(call())
            return output

        return replay


@pytest.mark.parametrize(
    ("name", "options"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)]
)
def test_recorded_calls_draw_the_eager_sequences(name, options):
    net = MODELS[name]()
    eager = net.generate(5, LENGTH, seed=3, batch_size=2, **options)
    recorder = Recorder()
    net._graphed = GraphedNetwork(net.network.eval_backbone, capture=recorder)
    assert net.generate(5, LENGTH, seed=3, batch_size=2, **options) == eager
    if name not in ("plaid", "ar"):  # Plaid calls with embeddings, AR's context grows
        assert recorder.replays > 2 * recorder.recorded  # the steps did replay


def test_a_replay_reads_its_new_inputs_and_keeps_earlier_outputs():
    backbone = MODELS["conditional"]().network.eval_backbone
    recorder = Recorder()
    graphed = GraphedNetwork(backbone, capture=recorder)
    ids = torch.randint(0, 4, (3, 2, LENGTH))  # three inputs of one signature
    labels = torch.tensor([[0, 1], [1, 2], [2, 0]])
    with torch.no_grad():
        outputs = [graphed(ids[i], None, labels=labels[i]) for i in range(3)]
        for i in range(3):
            expected = backbone(ids[i], None, labels=labels[i])
            torch.testing.assert_close(outputs[i], expected, rtol=0, atol=0)
        assert not torch.equal(outputs[0], outputs[1])
        assert recorder.recorded == 1 and recorder.replays == 3
        graphed(ids[0][:1], None, labels=labels[0][:1])  # another batch size: a new recording
        graphed(ids[0], None)  # no labels: another signature
        assert recorder.recorded == 3


def test_past_max_graphs_and_with_gradients_the_call_runs_eagerly():
    backbone = MODELS["mdlm"]().network.eval_backbone
    recorder = Recorder()
    graphed = GraphedNetwork(backbone, capture=recorder, max_graphs=2)
    with torch.no_grad():
        for length in (8, 9, 10, 11):
            ids = torch.randint(0, 4, (1, length))
            torch.testing.assert_close(graphed(ids), backbone(ids), rtol=0, atol=0)
    assert recorder.recorded == 2
    ids = torch.randint(0, 4, (1, 8))
    out = graphed(ids)  # gradients on: a training-style call is never replayed
    assert out.requires_grad and recorder.replays == 2


def test_a_call_that_cannot_be_recorded_warns_once_and_runs_eagerly():
    backbone = MODELS["mdlm"]().network.eval_backbone
    graphed = GraphedNetwork(backbone, capture=Recorder(fails=True))
    ids = torch.randint(0, 4, (2, 12))
    with torch.no_grad(), pytest.warns(UserWarning, match="cannot be recorded as a CUDA graph"):
        first = graphed(ids)
    with torch.no_grad(), warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always")
        torch.testing.assert_close(first, backbone(ids), rtol=0, atol=0)
        graphed(ids[:1])  # another signature fails too, without a second warning
    assert later == []


def test_the_wrapper_is_the_backbone_to_everything_else():
    backbone = MODELS["ar"]().network.eval_backbone
    graphed = GraphedNetwork(backbone, capture=Recorder())
    assert graphed.capabilities is backbone.capabilities
    assert graphed.step == backbone.step  # the recurrent AR step stays the network's
    assert next(graphed.parameters()) is next(backbone.parameters())


def test_cuda_graphs_are_refused_for_a_model_on_the_cpu():
    net = MODELS["mdlm"]()
    with pytest.raises(InputValueError, match="CUDA graphs need the model on a CUDA device"):
        net.enable_cuda_graphs()
