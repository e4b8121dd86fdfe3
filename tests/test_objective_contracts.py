"""What objectives and backbones declare, and how the core holds them to it: each objective's
own options only, one sampler table per objective, declared ranges checked the same way from a
config and from Python, a backbone's declared output size."""

import os
from importlib.metadata import EntryPoint

import pytest
import torch
from torch import nn

from genodiff import registry
from genodiff.backbones import Capabilities, build
from genodiff.config import ConfigError, load_config
from genodiff.generate import check_feasible
from genodiff.model import build_objective
from genodiff.samplers.request import SampleRequest
from tests.dna_objectives import IDS, ar, d3pm, mdlm, plaid, sedd
from tests.test_cli import DEMO

# ---------------------------------------------------------------------------------------------
# Each objective takes its own options only


@pytest.mark.parametrize(
    ("make", "option"),
    [(sedd, "carry_over"), (sedd, "zero_masking"), (sedd, "num_steps"), (d3pm, "carry_over")]
    + [(d3pm, "zero_masking"), (d3pm, "noise_schedule")],
)
def test_sedd_and_d3pm_refuse_mdlm_options_from_python(make, option):
    with pytest.raises(TypeError, match=rf"unexpected keyword argument '{option}'; it takes"):
        make(**{option: True})


@pytest.mark.parametrize(
    ("name", "option"), [("sedd", "carry_over"), ("d3pm", "zero_masking"), ("d3pm", "carry_over")]
)
def test_sedd_and_d3pm_refuse_mdlm_options_in_a_config(name, option):
    with pytest.raises(ConfigError, match=rf"unknown config key 'objective\.{option}'"):
        load_config(DEMO, [f"objective={name}", f"objective.{option}=true"])


def test_sedd_and_d3pm_hold_none_of_mdlms_flags():
    for objective in (sedd(), d3pm()):
        assert not {"carry_over", "zero_masking"} & set(vars(objective))
    assert not hasattr(sedd(), "x0_log_probs")  # SEDD's network gives scores, not x0


def test_d3pm_sections_saved_by_earlier_versions_still_load():
    # Earlier configs/objective/d3pm.yaml wrote MDLM's flags at these values into checkpoints.
    saved = {"name": "d3pm", "num_steps": 20, "zero_masking": False, "carry_over": True, **IDS}
    loaded = build_objective(saved)
    model = FixedLogits(torch.tensor([0.0, 1.0, 2.0, 3.0]))
    x0 = torch.tensor([[7, 8, 9, 10, 7, 8]])
    expected, _ = d3pm(num_steps=20).loss(model, x0, torch.Generator().manual_seed(3))
    got, _ = loaded.loss(model, x0, torch.Generator().manual_seed(3))
    assert torch.equal(got, expected)
    ablation = {**saved, "carry_over": False}
    with pytest.raises(ValueError, match=r"objective\.carry_over=False; D3PM no longer takes"):
        build_objective(ablation)


class FixedLogits(nn.Module):
    """Logits 0 except ``bases`` (4,) on ids 7..10 (A/C/G/T), whatever the input."""

    def __init__(self, bases: torch.Tensor) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.zeros(16).index_copy(0, torch.arange(7, 11), bases))

    def forward(self, input_ids, sigma=None):
        return self.table.expand(*input_ids.shape, -1)


# ---------------------------------------------------------------------------------------------
# One sampler table per objective

SAMPLER_TABLES = [
    (mdlm, "ancestral, cached, first-hitting, semi-ar"),
    (d3pm, "ancestral, cached, first-hitting, semi-ar"),
    (sedd, "analytic, euler"),
    (lambda: plaid(d_model=16, schedule_hidden=4), "ancestral"),
    (ar, "ancestral"),
]


@pytest.mark.parametrize(("make", "names"), SAMPLER_TABLES)
def test_an_unknown_sampler_lists_the_objectives_samplers(make, names):
    objective = make()
    with pytest.raises(ValueError, match=f"has no sampler 'nope'; choose one of: {names}$"):
        objective.sampler_name(SampleRequest(1, 4, sampler="nope"))
    with pytest.raises(ValueError, match="has no sampler 'nope'"):
        objective.sample(FixedLogits(torch.zeros(4)), SampleRequest(1, 4, sampler="nope"))
    default = names.split(", ")[0]
    assert objective.sampler_name(SampleRequest(1, 4)) == default


def test_the_cached_sampler_names_the_others_for_a_time_conditioned_objective():
    with pytest.raises(ValueError, match="Choose one of: ancestral, first-hitting, semi-ar$"):
        d3pm(time_conditioning=True).sampler_name(SampleRequest(1, 4, sampler="cached"))


# ---------------------------------------------------------------------------------------------
# Declared ranges: one check, the same message from a config and from Python

OUT_OF_RANGE = [
    # (objective, key, value, what the message asks for, written out by hand)
    ("mdlm", "sampling_eps", 1.5, "in (0, 1)"),
    ("mdlm", "num_steps", -1, "at least 0 (0 = continuous time)"),
    ("mdlm", "eval_t_samples", 0, "at least 1"),
    ("d3pm", "num_steps", 0, "at least 1 (D3PM runs in discrete time)"),
    ("d3pm", "hybrid_lambda", -0.5, "at least 0 (0 = pure NELBO)"),
    ("sedd", "sampling_eps", 0.0, "in (0, 1)"),
    ("plaid", "embed_dim", 0, "at least 1"),
    ("ar", "eval_t_samples", 0, "at least 1"),
]
MAKERS = {"mdlm": mdlm, "d3pm": d3pm, "sedd": sedd, "plaid": lambda **kw: plaid(d_model=16, **kw)}
MAKERS["ar"] = ar


@pytest.mark.parametrize(("name", "key", "value", "wanted"), OUT_OF_RANGE)
def test_python_and_config_refuse_a_value_with_the_same_message(name, key, value, wanted):
    message = f"objective.{key}: {value} is out of range; set a value {wanted}"
    with pytest.raises(ConfigError) as from_config:
        load_config(DEMO, [f"objective={name}", f"objective.{key}={value}"])
    with pytest.raises(ConfigError) as from_python:
        MAKERS[name](**{key: value})
    assert str(from_config.value) == str(from_python.value) == message


def test_python_construction_checks_the_declared_type_of_a_ranged_value():
    with pytest.raises(ConfigError, match=r"objective\.num_steps: expected an integer, got 2\.5"):
        mdlm(num_steps=2.5)


# ---------------------------------------------------------------------------------------------
# A backbone declares its output size


class Undeclared(nn.Module):
    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.out = nn.Embedding(vocab_size, vocab_size)

    def forward(self, input_ids, sigma=None, inputs_embeds=None):
        return self.out(input_ids)


class WideOutput(nn.Module):
    """Declares V = 10^6 outputs and keeps no ``vocab_size`` attribute of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))
        self.capabilities = Capabilities(vocab_size=10**6)


def test_a_backbone_without_a_declared_vocabulary_size_is_refused_at_build(monkeypatch):
    entry = EntryPoint("undeclared", f"{__name__}:Undeclared", "genodiff.backbones")
    monkeypatch.setattr(
        registry, "entry_points", lambda group: [entry] if group == "genodiff.backbones" else []
    )
    monkeypatch.delitem(registry._REGISTRIES["backbone"], "undeclared", raising=False)
    with pytest.raises(TypeError, match=r"Undeclared declares no capabilities: .*vocab_size=V"):
        build("undeclared", vocab_size=8)
    registry._REGISTRIES["backbone"].pop("undeclared", None)
    with pytest.raises(TypeError, match="vocab_size"):
        Capabilities(hidden_size=8)  # the declaration itself requires it
    with pytest.raises(ValueError, match="vocab_size must be >= 1"):
        Capabilities(vocab_size=0)


def test_the_sampling_memory_guard_counts_the_declared_vocabulary():
    # 8 bytes of ids + 4 bytes per output column per position: with V = 10^6 this request
    # needs ~4e4 x the host's memory; counted with V = 1 it would need 12% of it.
    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    request = SampleRequest(num_samples=1, length=host // 100)
    with pytest.raises(ValueError, match="needs at least .* of cpu memory"):
        check_feasible(request, batch_size=1, backbone=WideOutput())
