"""The masked samplers' sync-free step (``genodiff.samplers.masked.unmask(sync_free=True)``, the
default on CUDA, and first-hitting's ``hit(sync_free=True)``): the same sequences as the sparse
step, and no host sync inside the loop.

A host sync is any op that needs a tensor's value on the host: ``nonzero`` (its output size),
``item`` / ``bool`` / ``int`` of a tensor (``_local_scalar_dense``, ``is_nonzero``). A dispatch
mode counts them; the count of a sync-free run must not grow with the number of steps (what
runs before and after the loop is the same for any step count), while the sparse step's does
(the counter is seen to count)."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from genodiff import syncs
from genodiff.errors import NonFiniteOutputError
from tests.test_sampling_at_scale import LENGTH, MODELS, built

SYNCS = {"aten::nonzero", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::item"}

# (model, generate's options): every masked sampler that steps through ``unmask``
CASES = [
    ("mdlm", {"sampler": "ancestral"}),
    ("mdlm", {"sampler": "cached"}),
    ("mdlm", {"sampler": "cached", "prefix": "ACGTAC", "top_p": 0.9, "temperature": 0.7}),
    ("mdlm", {"sampler": "semi-ar", "block": 12, "stride": 6}),
    ("d3pm", {}),
    ("conditional", {"label": "b", "guidance": 2.0}),
    ("conditional", {"label": "a", "guidance": 3.0, "guidance_schedule": "ramp"}),
    ("conditional", {"label": "a", "guidance": 2.0, "guidance_form": "transition"}),
    ("mdlm", {"sampler": "first-hitting"}),
    ("mdlm", {"sampler": "first-hitting", "prefix": "ACGTAC", "top_p": 0.8, "temperature": 0.7}),
    ("conditional", {"sampler": "first-hitting", "label": "b", "guidance": 2.0}),
    ("conditional", {"sampler": "first-hitting", "label": "a", "guidance": 3.0,
                     "guidance_form": "transition"}),
    # D-CBG, exact: steps go on once a batch is revealed, with no position left to tilt
    ("mdlm", {"sampler": "semi-ar", "block": 12, "stride": 6, "label": "a", "guidance": 2.0,
              "classifier": "noisy", "classifier_form": "exact"}),
]  # fmt: skip
STEPLESS = ("first-hitting",)  # no steps (semi-ar's are per window)


class SyncCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.syncs = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func._schema.name in SYNCS:
            self.syncs += 1
        return func(*args, **(kwargs or {}))


@pytest.fixture
def sync_free(monkeypatch):
    """Every ``unmask`` runs sync-free, as on CUDA."""
    monkeypatch.setattr(syncs, "sync_free_on", lambda device: True)


def draw(name: str, options: dict, steps: int = 6, length: int = LENGTH):
    steps_option = {} if options.get("sampler") in STEPLESS else {"steps": steps}
    options = built(options)
    return MODELS[name]().generate(5, length, seed=3, batch_size=2, **steps_option, **options)


@pytest.mark.parametrize(("name", "options"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_the_sync_free_step_draws_the_sparse_steps_sequences(name, options, monkeypatch):
    sparse = draw(name, options)
    monkeypatch.setattr(syncs, "sync_free_on", lambda device: True)
    assert draw(name, options) == sparse


def syncs_of(name: str, options: dict, steps: int, length: int = LENGTH) -> int:
    with SyncCounter() as counter:
        draw(name, options, steps, length)
    return counter.syncs


@pytest.mark.parametrize("case", [0, 1, 5, 7])
def test_no_host_sync_inside_the_loop(case, monkeypatch):
    name, options = CASES[case]
    sparse = syncs_of(name, options, 4), syncs_of(name, options, 16)
    assert sparse[1] > sparse[0]  # the sparse step syncs every step: the counter counts
    monkeypatch.setattr(syncs, "sync_free_on", lambda device: True)
    assert syncs_of(name, options, 16) == syncs_of(name, options, 4)


@pytest.mark.parametrize("case", [8, 10, 11])
def test_no_host_sync_inside_the_first_hitting_loop(case, monkeypatch):
    name, options = CASES[case]  # one iteration per masked token: the length sets how many
    sparse = syncs_of(name, options, 0, 8), syncs_of(name, options, 0, 20)
    assert sparse[1] > sparse[0]
    monkeypatch.setattr(syncs, "sync_free_on", lambda device: True)
    assert syncs_of(name, options, 0, 20) == syncs_of(name, options, 0, 8)


@pytest.mark.parametrize(
    "options", [{"sampler": "ancestral", "steps": 4}, {"sampler": "first-hitting"}]
)
def test_a_non_finite_network_output_is_refused_after_the_loop(sync_free, monkeypatch, options):
    net = MODELS["mdlm"]()
    objective = net.network.objective
    real = objective.x0_log_probs

    def poisoned(model, x_t, t, labels=None):
        out = real(model, x_t, t, labels)  # (B, L, V)
        return torch.where(torch.rand_like(out) < 0.5, float("nan"), out)

    monkeypatch.setattr(objective, "x0_log_probs", poisoned)
    with pytest.raises(NonFiniteOutputError, match="not finite"):
        net.generate(2, LENGTH, seed=0, **options)


def test_the_label_range_is_checked_on_the_device_where_steps_are_sync_free(sync_free):
    embedding = MODELS["conditional"]().network.eval_backbone
    ids = torch.full((2, LENGTH), 7)
    with pytest.raises(RuntimeError, match=r"labels must lie in \[0, 2\]"):
        embedding(ids, None, labels=torch.tensor([0, 3]))
    with SyncCounter() as counter:
        embedding(ids, None, labels=torch.tensor([0, 2]))  # the null label is in range
    assert counter.syncs == 0


@pytest.mark.parametrize("sampler", ["ancestral", "cached", "first-hitting"])
@pytest.mark.parametrize("step", ["sparse", "sync-free"])
def test_a_non_finite_guidance_rate_is_refused_not_drawn_around(sampler, step, monkeypatch):
    """D-CBG in the transition form with a classifier whose output is NaN: its log rate factor
    is NaN, so no masked position would ever unmask. Refused as a non-finite output (it was:
    the steps drew nothing, the final step took the argmax of NaN, id 0 at every position;
    first-hitting's event never came, and the sparse loop ran for ever)."""
    if step == "sync-free":
        monkeypatch.setattr(syncs, "sync_free_on", lambda device: True)
    options = built({"label": "a", "guidance": 2.0, "classifier": "noisy"})
    for weight in options["classifier"].classifier.parameters():
        weight.data.fill_(float("nan"))
    steps = {} if sampler in STEPLESS else {"steps": 4}
    with pytest.raises(NonFiniteOutputError, match="not finite"):
        MODELS["mdlm"]().generate(
            2, LENGTH, seed=0, sampler=sampler, guidance_form="transition", **steps, **options
        )
