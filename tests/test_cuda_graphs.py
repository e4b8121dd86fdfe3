"""Replaying the network call, and the masked samplers' whole sync-free step, from recordings
(genodiff.backbones.graphed) gives the eager results. A CUDA graph cannot run here, so the
recording is a stand-in with a graph's semantics: it reruns the function it recorded (not the
one of a later call) on the tensors captured at recording time and writes into the output
tensors it returns at every replay. A wrapper that forgot to copy new inputs in, or to copy the
outputs out before the next replay, or a step that held a value a later step changes, gives
wrong samples. tests/gpu runs real graphs."""

from __future__ import annotations

import warnings
from functools import partial

import pytest
import torch

from genodiff import syncs
from genodiff.backbones.graphed import GraphedNetwork
from genodiff.errors import InputValueError
from genodiff.guidance import Guidance
from genodiff.samplers.masked import masked_guide, sync_free_step, whole_step_graphs
from genodiff.samplers.request import SampleRequest
from tests.test_sampling_at_scale import CASES, LENGTH, MODELS, built


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
        output = call()  # the output tensor(s), overwritten by each replay

        def replay():
            self.replays += 1
            fresh = call()
            for held, new in zip(*(as_tuple(o) for o in (output, fresh)), strict=True):
                held.copy_(new)
            return output

        return replay


def as_tuple(outputs):
    return outputs if isinstance(outputs, tuple) else (outputs,)


@pytest.mark.parametrize(
    ("name", "options"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)]
)
def test_recorded_calls_draw_the_eager_sequences(name, options, tmp_path):
    net, options = MODELS[name](), built(options, tmp_path)
    eager = net.generate(5, LENGTH, seed=3, batch_size=2, **options)
    recorder = Recorder()
    net._graphed = GraphedNetwork(net.network.eval_backbone, capture=recorder)
    assert net.generate(5, LENGTH, seed=3, batch_size=2, **options) == eager
    if name != "plaid" and not name.startswith("ar"):  # Plaid calls with embeddings, AR's
        # context grows (a recurrent step, or HyenaDNA's calls on ever longer prefixes)
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


# every masked sampler, unguided and D-CFG (a first-hitting run of D-CFG in both forms); a
# classifier-guided request (D-CBG) replays the network call alone (the cases above)
STEP_CASES = [
    (name, options)
    for name, options in CASES
    if name in ("mdlm", "d3pm", "conditional") and "classifier" not in options
]
STEP_CASES += [
    ("conditional", {"sampler": "first-hitting", "label": "b", "guidance": 2.0}),
    ("conditional", {"sampler": "first-hitting", "label": "a", "guidance": 3.0,
                     "guidance_form": "transition"}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "options"), STEP_CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(STEP_CASES)]
)
def test_whole_sync_free_steps_replayed_draw_the_eager_sequences(
    name, options, monkeypatch, tmp_path
):
    monkeypatch.setattr(syncs, "sync_free_on", lambda device: True)  # as on CUDA
    net, options = MODELS[name](), built(options, tmp_path)
    eager = net.generate(5, LENGTH, seed=3, batch_size=2, **options)
    recorder = Recorder()
    net._graphed = GraphedNetwork(net.network.eval_backbone, capture=recorder)
    assert net.generate(5, LENGTH, seed=3, batch_size=2, **options) == eager
    keys = [key for key, recording in net._graphed._recordings.items() if recording is not None]
    kind = "first-hitting step" if options.get("sampler") == "first-hitting" else "masked step"
    assert keys and all(key[0][0] == kind for key in keys)  # whole steps only
    assert recorder.replays > 2 * recorder.recorded


def step_inputs(variant: int, mask_id: int) -> tuple[torch.Tensor, ...]:
    """x (2, L), given (2, L), times (3,), u (2, 2, L): a step's inputs, one of two variants
    that differ in every input."""
    generator = torch.Generator().manual_seed(variant)
    x = torch.where(torch.rand(2, LENGTH, generator=generator) < 0.5, 7 + variant, mask_id)
    given = torch.rand(2, LENGTH, generator=generator) < 0.2
    times = torch.tensor([0.9 - 0.3 * variant, 0.8 - 0.3 * variant, 0.5 - 0.3 * variant])
    u = torch.rand(2, 2, LENGTH, generator=generator, dtype=torch.float64)
    return x, given, times.double(), u


@pytest.mark.parametrize("guided", [False, True])
def test_a_replayed_step_reads_every_input_anew(guided):
    """Each input of a recorded step is replaced in turn: the replay must follow it (an input
    the recording held by value would give the recorded step's result)."""
    net = MODELS["conditional"]()
    objective, backbone = net.network.eval_objective, net.network.eval_backbone
    guidance = Guidance(label=1, gamma=2.0, schedule="ramp") if guided else None
    request = SampleRequest(2, LENGTH, guidance=guidance)
    mask_id = objective.process.mask_id
    step = partial(sync_free_step, mask_id, masked_guide(objective, backbone, request), request)
    recorder = Recorder()
    graphed = GraphedNetwork(backbone, capture=recorder)
    first, second = step_inputs(0, mask_id), step_inputs(1, mask_id)
    with torch.no_grad():
        graphed.call("step", step, *first)  # recorded with the first inputs
        for changed in range(len(first)):
            inputs = (*first[:changed], second[changed], *first[changed + 1 :])
            expected = step(*inputs)
            assert not torch.equal(expected[0], step(*first)[0])  # the input matters
            for got, want in zip(graphed.call("step", step, *inputs), expected, strict=True):
                torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert recorder.recorded == 1 and recorder.replays == 1 + len(first)


def test_a_step_with_a_classifier_keeps_the_network_call_alone_replayed():
    backbone = MODELS["mdlm"]().network.eval_backbone
    graphed = GraphedNetwork(backbone, capture=Recorder())
    free = SampleRequest(2, LENGTH, guidance=Guidance(label=1, gamma=2.0))
    steered = SampleRequest(2, LENGTH, guidance=Guidance(label=1, classifier=object()))
    assert whole_step_graphs(graphed, SampleRequest(2, LENGTH)) is graphed
    assert whole_step_graphs(graphed, free) is graphed
    assert whole_step_graphs(graphed, steered) is None
    assert whole_step_graphs(backbone, free) is None  # no graphs asked for


def test_each_sampler_setting_has_its_own_recorded_step(monkeypatch):
    """A recording bakes in the settings its step was recorded with (temperature, nucleus,
    label, gamma, sampler): one model drawing with each in turn must replay the right one."""
    monkeypatch.setattr(syncs, "sync_free_on", lambda device: True)  # as on CUDA
    net = MODELS["conditional"]()
    with torch.no_grad():  # labels that matter: the classes' predictions differ
        net.network.eval_backbone.backbone.label_embedding.embedding.weight.normal_(0, 3.0)
    options = [
        {"temperature": 0.5},
        {"temperature": 2.0},
        {"top_p": 0.6},
        {"label": "a", "guidance": 2.0},
        {"label": "b", "guidance": 2.0},
        {"label": "b", "guidance": 4.0},
        {"sampler": "first-hitting"},
    ]
    options = [o if "sampler" in o else {"steps": 6, **o} for o in options]
    eager = [net.generate(4, LENGTH, seed=5, **o) for o in options]
    assert len(set(eager)) == len(eager)  # every setting draws differently
    recorder = Recorder()
    net._graphed = GraphedNetwork(net.network.eval_backbone, capture=recorder, max_graphs=16)
    assert [net.generate(4, LENGTH, seed=5, **o) for o in options] == eager
    assert recorder.recorded == len(options)
