"""Which parameters train with weight decay: those Caduceus's training exempts (its
``add_optimizer_hooks`` with ``bias_weight_decay`` and ``normalization_weight_decay`` false:
biases, ``nn.Embedding`` and torch's normalization layers, and parameters marked
``_no_weight_decay``; mamba-ssm's RMSNorm is none of these and is decayed) train without it, the
rest with ``optim.weight_decay``; and a checkpoint whose optimizer state has the groups of
earlier genodiff versions resumes with each parameter's moments."""

from types import SimpleNamespace

import pytest
import torch

import genodiff
from genodiff.checkpoints.io import read_checkpoint_file
from genodiff.training.module import GenerativeTrainingModule
from tests.test_cli import DEMO
from tests.test_resume import BASE

MAMBA_MIXER_EXEMPT = ["A_log", "D", "conv1d.bias", "dt_proj.bias"]
MAMBA_MIXER_DECAYED = [
    "in_proj.weight",
    "conv1d.weight",
    "x_proj.weight",
    "dt_proj.weight",
    "out_proj.weight",
]
# the reverse Mamba of a weight-tied BiMamba shares in_proj and out_proj with the forward one
REV_MIXER_DECAYED = ["conv1d.weight", "x_proj.weight", "dt_proj.weight"]

# One layer of each backbone of configs/model/: (model section, objective, the parameters
# without weight decay, those with it), names as the backbone's state dict has them.
BACKBONES = {
    "caduceus_ph": (
        {"name": "caduceus", "d_model": 16, "n_layer": 1},
        "mdlm",
        [
            "embeddings.word_embeddings.weight",
            *(f"layers.0.mixer.mamba_fwd.{n}" for n in MAMBA_MIXER_EXEMPT),
            *(f"layers.0.mixer.mamba_rev.{n}" for n in MAMBA_MIXER_EXEMPT),
        ],
        [
            *(f"layers.0.mixer.mamba_fwd.{n}" for n in MAMBA_MIXER_DECAYED),
            *(f"layers.0.mixer.mamba_rev.{n}" for n in REV_MIXER_DECAYED),
            "layers.0.norm.weight",  # RMSNorm
            "norm_f.weight",
        ],
    ),
    "caduceus_ps": (
        {"name": "caduceus", "d_model": 16, "n_layer": 1, "rcps": True},
        "mdlm",
        [
            "embeddings.word_embeddings.embedding.weight",
            *(f"layers.0.mixer.submodule.mamba_fwd.{n}" for n in MAMBA_MIXER_EXEMPT),
            *(f"layers.0.mixer.submodule.mamba_rev.{n}" for n in MAMBA_MIXER_EXEMPT),
        ],
        [
            *(f"layers.0.mixer.submodule.mamba_fwd.{n}" for n in MAMBA_MIXER_DECAYED),
            *(f"layers.0.mixer.submodule.mamba_rev.{n}" for n in REV_MIXER_DECAYED),
            "layers.0.norm.weight",  # RMSNorm
            "norm_f.weight",
        ],
    ),
    "mamba": (
        {"name": "mamba", "d_model": 16, "n_layer": 1},
        "ar",
        ["embedding.weight", *(f"layers.0.mixer.{n}" for n in MAMBA_MIXER_EXEMPT)],
        [
            *(f"layers.0.mixer.{n}" for n in MAMBA_MIXER_DECAYED),
            "layers.0.norm.weight",  # RMSNorm
            "norm_f.weight",
        ],
    ),
    "hyena": (
        {"name": "hyena", "d_model": 16, "n_layer": 1, "d_inner": 32},
        "ar",
        [
            "embeddings.word_embeddings.weight",
            "layers.0.norm1.weight",  # nn.LayerNorm
            "layers.0.norm1.bias",
            "layers.0.mixer.in_proj.bias",
            "layers.0.mixer.out_proj.bias",
            "layers.0.mixer.short_filter.bias",
            "layers.0.mixer.filter_fn.bias",
            # the implicit filter's FFN: layer.wd = 0 (upstream's configs)
            "layers.0.mixer.filter_fn.implicit_filter.0.weight",
            "layers.0.mixer.filter_fn.implicit_filter.0.bias",
            "layers.0.mixer.filter_fn.implicit_filter.1.freq",  # every Sin's, one Parameter
            "layers.0.mixer.filter_fn.implicit_filter.2.weight",
            "layers.0.mixer.filter_fn.implicit_filter.2.bias",
            "layers.0.mixer.filter_fn.implicit_filter.4.weight",
            "layers.0.mixer.filter_fn.implicit_filter.4.bias",
            "layers.0.mixer.filter_fn.implicit_filter.6.weight",
            "layers.0.norm2.weight",
            "layers.0.norm2.bias",
            "layers.0.mlp.fc1.bias",
            "layers.0.mlp.fc2.bias",
            "ln_f.weight",
            "ln_f.bias",
        ],
        [
            "layers.0.mixer.in_proj.weight",
            "layers.0.mixer.out_proj.weight",
            "layers.0.mixer.short_filter.weight",
            "layers.0.mlp.fc1.weight",
            "layers.0.mlp.fc2.weight",
        ],
    ),
}


def group_names(model: dict, objective: str, weight_decay: float) -> dict[float, set[str]]:
    """The backbone parameters' names in each optimizer group, by the group's weight decay."""
    config = {
        "model": model,
        "objective": {"name": objective},
        "optim": {"weight_decay": weight_decay},
    }
    module = GenerativeTrainingModule(config)
    module.trainer = SimpleNamespace(estimated_stepping_batches=10)
    optimizer = module.configure_optimizers()["optimizer"]
    backbone = module.backbone.backbone
    names = {id(p): n for n, p in backbone.named_parameters()}  # a shared one: its first name
    return {
        group["weight_decay"]: {names[id(p)] for p in group["params"]}
        for group in optimizer.param_groups
    }


@pytest.mark.parametrize("name", BACKBONES)
def test_weight_decay_groups_are_caduceus_training_s(name):
    model, objective, exempt, decayed = BACKBONES[name]
    groups = group_names(model, objective, weight_decay=0.1)
    assert groups == {0.0: set(exempt), 0.1: set(decayed)}


def caduceus_exempt(name: str) -> bool:
    """Whether a Caduceus-Ph parameter trains without weight decay (``BACKBONES``' rule)."""
    exempt = ("embeddings.word_embeddings.weight", "A_log", ".D", "conv1d.bias", "dt_proj.bias")
    return name.endswith(exempt)


def test_a_checkpoint_of_earlier_groups_resumes_with_each_parameter_s_moments(
    tmp_path, monkeypatch
):
    # Before genodiff followed Caduceus, only Mamba's A_log and D trained without weight
    # decay: the optimizer state of such a checkpoint lists every other parameter first.
    genodiff.train(DEMO, [*BASE, "trainer.max_steps=2"], output_dir=tmp_path)
    path = tmp_path / "checkpoints" / "last.ckpt"
    checkpoint = read_checkpoint_file(path)
    module = GenerativeTrainingModule(checkpoint["hyper_parameters"]["config"])
    names = [n for n, _ in module.backbone.named_parameters()]  # the optimizer's order
    now = [n for n in names if not caduceus_exempt(n)] + [n for n in names if caduceus_exempt(n)]
    marked = [n for n in names if n.endswith(("A_log", ".D"))]
    before = [n for n in names if n not in marked] + marked
    state = checkpoint["optimizer_states"][0]
    moments = {name: state["state"][i] for i, name in enumerate(now)}
    state["state"] = {before.index(name): value for name, value in moments.items()}
    sizes = (len(names) - len(marked), len(marked))
    state["param_groups"][0]["params"] = list(range(sizes[0]))
    state["param_groups"][1]["params"] = list(range(sizes[0], len(names)))
    torch.save(checkpoint, path)

    restored = {}
    original = GenerativeTrainingModule.on_train_start

    def record_the_restored_state(self):
        original(self)
        optimizer = self.trainer.optimizers[0]
        for group in optimizer.param_groups:
            for name, p in self.backbone.named_parameters():
                if any(p is q for q in group["params"]):
                    restored[name] = (group["weight_decay"], optimizer.state[p]["exp_avg"].clone())

    monkeypatch.setattr(GenerativeTrainingModule, "on_train_start", record_the_restored_state)
    genodiff.train(DEMO, [*BASE, "trainer.max_steps=3", "ckpt_path=last"], output_dir=tmp_path)
    assert set(restored) == set(names)
    for name in names:
        weight_decay, exp_avg = restored[name]
        assert weight_decay == (0.0 if caduceus_exempt(name) else 0.1), name
        torch.testing.assert_close(exp_avg, moments[name]["exp_avg"], rtol=0, atol=0)
