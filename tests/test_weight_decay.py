"""Which parameters train with weight decay: those Caduceus's training exempts (its
``add_optimizer_hooks`` with ``bias_weight_decay`` and ``normalization_weight_decay`` false:
biases, ``nn.Embedding`` and torch's normalization layers, and parameters marked
``_no_weight_decay``; mamba-ssm's RMSNorm is none of these and is decayed) train without it, the
rest with ``optim.weight_decay``; parameters with settings of their own (HyenaDNA's filter:
``layer.lr``, ``layer.wd``, ``lr_pos_emb``, upstream's ``_optim``) train in groups of their own
with those, each group's lr scaled by the schedule; and a checkpoint whose optimizer state has
the groups of earlier genodiff versions resumes with each parameter's moments."""

import math
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

import genodiff
from genodiff.backbones.build import build
from genodiff.checkpoints import save_pretrained
from genodiff.checkpoints.io import read_checkpoint_file
from genodiff.config import load_config
from genodiff.finetuning.classifier import SequenceClassifier, load_backbone
from genodiff.finetuning.config import FinetuneOptimConfig
from genodiff.finetuning.module import ClassifierModule
from genodiff.tokenizers import DNATokenizer
from genodiff.training.module import GenerativeTrainingModule
from genodiff.training.optim import adamw_with_cosine, regroup_earlier_optimizer_state
from tests.test_cli import DEMO
from tests.test_finetune_protocol import model_from_the_defaults_list
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

# The implicit filter's FFN of HyenaDNA's layer 0 (every Sin's frequency is one Parameter).
HYENA_FILTER_FFN = [
    "layers.0.mixer.filter_fn.implicit_filter.0.weight",
    "layers.0.mixer.filter_fn.implicit_filter.0.bias",
    "layers.0.mixer.filter_fn.implicit_filter.1.freq",
    "layers.0.mixer.filter_fn.implicit_filter.2.weight",
    "layers.0.mixer.filter_fn.implicit_filter.2.bias",
    "layers.0.mixer.filter_fn.implicit_filter.4.weight",
    "layers.0.mixer.filter_fn.implicit_filter.4.bias",
    "layers.0.mixer.filter_fn.implicit_filter.6.weight",
]
# HyenaDNA's layer-0 parameters other than the filter FFN, without weight decay and with it.
HYENA_EXEMPT = [
    "embeddings.word_embeddings.weight",
    "layers.0.norm1.weight",  # nn.LayerNorm
    "layers.0.norm1.bias",
    "layers.0.mixer.in_proj.bias",
    "layers.0.mixer.out_proj.bias",
    "layers.0.mixer.short_filter.bias",
    "layers.0.mixer.filter_fn.bias",
    "layers.0.norm2.weight",
    "layers.0.norm2.bias",
    "layers.0.mlp.fc1.bias",
    "layers.0.mlp.fc2.bias",
    "ln_f.weight",
    "ln_f.bias",
]
HYENA_DECAYED = [
    "layers.0.mixer.in_proj.weight",
    "layers.0.mixer.out_proj.weight",
    "layers.0.mixer.short_filter.weight",
    "layers.0.mlp.fc1.weight",
    "layers.0.mlp.fc2.weight",
]
HYENA = {"name": "hyena", "d_model": 16, "n_layer": 1, "d_inner": 32}

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
    # the implicit filter's FFN: layer.wd = 0 and no layer.lr (configs/model/hyena.yaml)
    "hyena": (HYENA, "ar", [*HYENA_EXEMPT, *HYENA_FILTER_FFN], HYENA_DECAYED),
}


def optimizer_and_schedule(config: dict, total_steps: int = 10) -> tuple:
    """The training module of ``config`` and what its ``configure_optimizers`` returns: the
    optimizer and its schedule, for a run of ``total_steps`` steps."""
    module = GenerativeTrainingModule(config)
    module.trainer = SimpleNamespace(estimated_stepping_batches=total_steps)
    built = module.configure_optimizers()
    return module, built["optimizer"], built["lr_scheduler"]["scheduler"]


def names_by_group(module, optimizer, key) -> dict:
    """The backbone parameters' names in each optimizer group, by ``key(group)``."""
    backbone = module.backbone.backbone
    names = {id(p): n for n, p in backbone.named_parameters()}  # a shared one: its first name
    return {key(group): {names[id(p)] for p in group["params"]} for group in optimizer.param_groups}


def group_names(model: dict, objective: str, weight_decay: float) -> dict[float, set[str]]:
    """The backbone parameters' names in each optimizer group, by the group's weight decay."""
    config = {
        "model": model,
        "objective": {"name": objective},
        "optim": {"weight_decay": weight_decay},
    }
    module, optimizer, _ = optimizer_and_schedule(config)
    return names_by_group(module, optimizer, lambda group: group["weight_decay"])


def hyena_config(layer: dict) -> dict:
    """A one-layer HyenaDNA run with ``layer`` settings, optim.lr 1e-3, weight decay 0.1,
    a warm-up over the first 10% of the steps and a cosine down to 0.1 x lr."""
    return {
        "model": {**HYENA, "layer": {"l_max": 64, **layer}},
        "objective": {"name": "ar"},
        "optim": {"lr": 1e-3, "weight_decay": 0.1, "warmup_fraction": 0.1, "min_lr_ratio": 0.1},
    }


# layer.lr and layer.wd for the filter FFN, lr_pos_emb for the positional features z
OWN_SETTINGS = {"lr": 3e-3, "wd": 0.05, "lr_pos_emb": 2e-5}
POS_EMB = "layers.0.mixer.filter_fn.pos_emb.z"


def test_hyena_s_filter_trains_with_its_own_lr_and_weight_decay():
    module, optimizer, _ = optimizer_and_schedule(hyena_config(OWN_SETTINGS))
    groups = names_by_group(module, optimizer, lambda g: (g["lr"], g["weight_decay"]))
    assert groups == {
        (1e-3, 0.1): set(HYENA_DECAYED),
        (1e-3, 0.0): set(HYENA_EXEMPT),
        (3e-3, 0.05): set(HYENA_FILTER_FFN),  # upstream's _optim: {"lr": lr, "weight_decay": wd}
        (2e-5, 0.0): {POS_EMB},  # upstream's register("z", lr=lr_pos_emb): no weight decay
    }


def test_the_schedule_scales_each_group_s_own_lr():
    total, warmup, step = 20, 2, 11  # warmup = 10% of 20 steps
    module, optimizer, schedule = optimizer_and_schedule(hyena_config(OWN_SETTINGS), total)
    for _ in range(step):
        optimizer.step()  # no gradients: the weights stay
        schedule.step()
    # after the warm-up: 0.1 + 0.9 * (1 + cos(pi * progress)) / 2, progress = (11 - 2) / (20 - 2)
    multiplier = 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))
    assert multiplier == pytest.approx(0.55)
    own_lr = {
        frozenset(HYENA_DECAYED): 1e-3,
        frozenset(HYENA_EXEMPT): 1e-3,
        frozenset(HYENA_FILTER_FFN): 3e-3,
        frozenset([POS_EMB]): 2e-5,
    }
    groups = names_by_group(module, optimizer, lambda g: id(g))
    lrs = {frozenset(groups[id(g)]): g["lr"] for g in optimizer.param_groups}
    assert lrs == pytest.approx({names: lr * multiplier for names, lr in own_lr.items()})


def test_the_shipped_hyena_config_keeps_two_groups():
    # configs/model/hyena.yaml (layer.wd 0, no layer.lr): the FFN joins the group without
    # weight decay, every group at optim.lr: the groups, and so the optimizer state's layout,
    # of checkpoints written before the filter's own settings were honoured
    config = load_config(DEMO, ["model=hyena", "objective=ar", "optim.lr=1e-3"])
    module, optimizer, _ = optimizer_and_schedule(OmegaConf.to_container(config))
    groups = names_by_group(module, optimizer, lambda g: (g["lr"], g["weight_decay"]))
    assert list(groups) == [(1e-3, 0.1), (1e-3, 0.0)]
    ffn = {f"layers.{i}.{n.removeprefix('layers.0.')}" for i in (0, 1) for n in HYENA_FILTER_FFN}
    assert ffn <= groups[(1e-3, 0.0)]


def test_a_fine_tune_trains_a_pretrained_hyena_filter_at_the_sweep_s_lr(tmp_path):
    # a folder's layer.lr is its pre-training's (upstream's fine-tuning configs give the layer
    # the fine-tuning's lr); its layer.wd still holds
    model = build(**HYENA, vocab_size=12, layer={"l_max": 64, "lr": 6e-4, "wd": 0.0})
    backbone, _ = load_backbone(str(save_pretrained(model, tmp_path / "hyenadna")))
    optim = FinetuneOptimConfig(weight_decay=0.1)
    optimizer = adamw_with_cosine((backbone,), 2e-3, optim, 10)["optimizer"]
    names = {id(p): n for n, p in backbone.backbone.named_parameters()}
    groups = {
        (g["lr"], g["weight_decay"]): {names[id(p)] for p in g["params"]}
        for g in optimizer.param_groups
    }
    assert groups == {
        (2e-3, 0.1): set(HYENA_DECAYED),
        (2e-3, 0.0): {*HYENA_EXEMPT, *HYENA_FILTER_FFN},
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


def lay_out_as_before(path, now: list[list[str]], before: list[list[str]]) -> dict[str, dict]:
    """Rewrite the optimizer state of the checkpoint at ``path``, laid out in the groups
    ``now`` (each a list of parameter names, in the optimizer's order), as an earlier genodiff
    wrote it, in the two groups ``before``; returns each parameter's saved state by name."""
    checkpoint = read_checkpoint_file(path)
    state = checkpoint["optimizer_states"][0]
    assert [len(g["params"]) for g in state["param_groups"]] == [len(g) for g in now]
    order_now, order_before = sum(now, []), sum(before, [])
    moments = {name: state["state"][i] for i, name in enumerate(order_now)}
    state["state"] = {order_before.index(name): value for name, value in moments.items()}
    del state["param_groups"][2:]
    schedule = checkpoint["lr_schedulers"][0]
    schedule["base_lrs"], schedule["_last_lr"] = schedule["base_lrs"][:2], schedule["_last_lr"][:2]
    first = 0
    for group, names in zip(state["param_groups"], before, strict=True):
        group["params"] = list(range(first, first + len(names)))
        first += len(names)
    torch.save(checkpoint, path)
    return moments


def record_the_restored_state(monkeypatch) -> dict[str, tuple]:
    """Filled when a resumed run starts training: each backbone parameter's (weight decay, lr,
    exp_avg) as the optimizer holds them then."""
    restored = {}
    original = GenerativeTrainingModule.on_train_start

    def recording(self):
        original(self)
        optimizer = self.trainer.optimizers[0]
        for group in optimizer.param_groups:
            for name, p in self.backbone.named_parameters():
                if any(p is q for q in group["params"]):
                    exp_avg = optimizer.state[p]["exp_avg"].clone()
                    restored[name] = (group["weight_decay"], group["lr"], exp_avg)

    monkeypatch.setattr(GenerativeTrainingModule, "on_train_start", recording)
    return restored


def backbone_names(path) -> list[str]:
    """The backbone's parameter names of the run of the checkpoint at ``path``, in the
    optimizer's order."""
    config = read_checkpoint_file(path)["hyper_parameters"]["config"]
    return [n for n, _ in GenerativeTrainingModule(config).backbone.named_parameters()]


def test_a_checkpoint_of_earlier_groups_resumes_with_each_parameter_s_moments(
    tmp_path, monkeypatch
):
    # Before genodiff followed Caduceus, only Mamba's A_log and D trained without weight
    # decay: the optimizer state of such a checkpoint lists every other parameter first.
    genodiff.train(DEMO, [*BASE, "trainer.max_steps=2"], output_dir=tmp_path)
    path = tmp_path / "checkpoints" / "last.ckpt"
    names = backbone_names(path)
    now = [[n for n in names if not caduceus_exempt(n)], [n for n in names if caduceus_exempt(n)]]
    marked = [n for n in names if n.endswith(("A_log", ".D"))]
    moments = lay_out_as_before(path, now, [[n for n in names if n not in marked], marked])

    restored = record_the_restored_state(monkeypatch)
    genodiff.train(DEMO, [*BASE, "trainer.max_steps=3", "ckpt_path=last"], output_dir=tmp_path)
    assert set(restored) == set(names)
    for name in names:
        weight_decay, _, exp_avg = restored[name]
        assert weight_decay == (0.0 if caduceus_exempt(name) else 0.1), name
        torch.testing.assert_close(exp_avg, moments[name]["exp_avg"], rtol=0, atol=0)


# A one-layer HyenaDNA AR run on the demo data (its 128-token windows within l_max).
HYENA_RUN = [o for o in BASE if not o.startswith("model=")] + [
    "model=hyena",
    "objective=ar",
    "model.d_model=16",
    "model.n_layer=1",
    "model.d_inner=32",
    "model.layer.l_max=256",
]


def hyena_exempt(name: str) -> bool:
    """Whether a HyenaDNA parameter trains without weight decay by Caduceus's rule (biases,
    embeddings, LayerNorms), whatever settings of its own it has."""
    return name.endswith(("bias", "word_embeddings.weight")) or ".norm" in name or "ln_f" in name


def test_a_hyena_checkpoint_of_the_groups_before_its_own_settings_resumes(tmp_path, monkeypatch):
    # Before genodiff honoured the filter's own settings, layer.wd != 0 left the filter FFN to
    # the rule at optim.weight_decay (its weights decayed, its biases not), in two groups.
    run = [*HYENA_RUN, "model.layer.wd=0.05"]
    genodiff.train(DEMO, [*run, "trainer.max_steps=2"], output_dir=tmp_path)
    path = tmp_path / "checkpoints" / "last.ckpt"
    names = backbone_names(path)
    ffn = [n for n in names if ".implicit_filter." in n]
    rest = [n for n in names if n not in ffn]
    now = [[n for n in rest if not hyena_exempt(n)], [n for n in rest if hyena_exempt(n)], ffn]
    before = [[n for n in names if not hyena_exempt(n)], [n for n in names if hyena_exempt(n)]]
    moments = lay_out_as_before(path, now, before)

    restored = record_the_restored_state(monkeypatch)
    genodiff.train(DEMO, [*run, "trainer.max_steps=3", "ckpt_path=last"], output_dir=tmp_path)
    assert set(restored) == set(names)
    for name in names:
        weight_decay, _, exp_avg = restored[name]
        expected = 0.05 if name in ffn else 0.0 if hyena_exempt(name) else 0.1
        assert weight_decay == expected, name
        torch.testing.assert_close(exp_avg, moments[name]["exp_avg"], rtol=0, atol=0)


def test_a_resume_with_another_optim_lr_keeps_the_filter_s_own(tmp_path, monkeypatch):
    constant = ["optim.warmup_fraction=0", "optim.min_lr_ratio=1"]  # multiplier 1 at every step
    run = [*HYENA_RUN, *constant, "model.layer.lr=3e-3", "model.layer.wd=0.05"]
    genodiff.train(DEMO, [*run, "trainer.max_steps=2"], output_dir=tmp_path)
    changed = ["optim.lr=1e-4", "optim.weight_decay=0.01"]
    restored = record_the_restored_state(monkeypatch)
    genodiff.train(
        DEMO, [*run, *changed, "trainer.max_steps=4", "ckpt_path=last"], output_dir=tmp_path
    )
    for name, (weight_decay, lr, _) in restored.items():
        if ".implicit_filter." in name:
            assert (weight_decay, lr) == (0.05, 3e-3), name
        else:
            assert (weight_decay, lr) == (0.0 if hyena_exempt(name) else 0.01, 1e-4), name
    state = read_checkpoint_file(tmp_path / "checkpoints" / "last.ckpt")
    groups = state["optimizer_states"][0]["param_groups"]
    settings = [(g["lr"], g["initial_lr"], g["weight_decay"]) for g in groups]
    assert settings == [(1e-4, 1e-4, 0.01), (1e-4, 1e-4, 0.0), (3e-3, 3e-3, 0.05)]
    assert state["lr_schedulers"][0]["base_lrs"] == [1e-4, 1e-4, 3e-3]


@pytest.mark.parametrize("source", ["folder", "checkpoint"])
def test_a_fine_tune_of_a_pretrained_backbone_keeps_its_weight_decay_groups(
    source, toy, tmp_path, monkeypatch
):
    # Each fold fine-tunes a deep copy of the pretrained backbone, and a training checkpoint's
    # is its EMA copy: a copied Parameter loses its marks (Mamba's A_log and D), which then
    # trained with weight decay.
    config, _ = toy
    if source == "folder":
        backbone = build(name="caduceus", d_model=16, n_layer=1, vocab_size=12)
        pretrained = save_pretrained(backbone, tmp_path / "caduceus", tokenizer=DNATokenizer())
    else:
        genodiff.train(DEMO, [*BASE, "trainer.max_steps=2"], output_dir=tmp_path / "run")
        pretrained = tmp_path / "run" / "checkpoints" / "last.ckpt"
    folds = []
    original = ClassifierModule.configure_optimizers

    def recording(self):
        built = original(self)
        names = {id(p): n for n, p in self.classifier.backbone.named_parameters()}
        groups = built["optimizer"].param_groups
        params = [(p, g["weight_decay"]) for g in groups for p in g["params"]]
        folds.append({names[id(p)]: decay for p, decay in params if id(p) in names})  # no head
        return built

    monkeypatch.setattr(ClassifierModule, "configure_optimizers", recording)
    model_from_the_defaults_list(config)  # its own model section would be another backbone
    overrides = [f"pretrained={pretrained}", "optim.weight_decay=0.1"]
    genodiff.finetune(str(config), overrides, progress=False)
    assert len(folds) == 2
    for decays in folds:
        assert any(name.endswith("A_log") for name in decays)
        assert decays == {name: 0.0 if caduceus_exempt(name) else 0.1 for name in decays}


def test_a_fine_tune_checkpoint_of_a_copy_without_marks_resumes_with_each_parameter_s_moments():
    # Before copy_settings, a fold's copy of a pretrained backbone had lost its marks: its
    # checkpoints hold A_log and D among the decayed parameters (biases and the embedding
    # still exempt, by name and module).
    torch.manual_seed(0)
    backbone = build(name="caduceus", d_model=16, n_layer=1, vocab_size=12)
    classifier = SequenceClassifier(backbone, 2, DNATokenizer())
    named = dict(classifier.named_parameters())  # the optimizer's order

    def exempt_without_marks(name: str) -> bool:
        return name.endswith(("bias", "word_embeddings.weight"))

    before = [[n for n in named if not exempt_without_marks(n)]]
    before.append([n for n in named if exempt_without_marks(n)])
    groups = [{"params": [named[n] for n in before[0]], "weight_decay": 0.1}]
    groups.append({"params": [named[n] for n in before[1]], "weight_decay": 0.0})
    earlier = torch.optim.AdamW(groups, lr=3e-3)
    schedule = torch.optim.lr_scheduler.LambdaLR(earlier, lambda step: 1.0)
    for p in named.values():
        p.grad = torch.randn_like(p)
    earlier.step()
    moments = {n: earlier.state[p]["exp_avg"].clone() for n, p in named.items()}
    checkpoint = {
        "optimizer_states": [earlier.state_dict()],
        "lr_schedulers": [schedule.state_dict()],
    }

    regroup_earlier_optimizer_state(checkpoint, (classifier,))
    optim = FinetuneOptimConfig(weight_decay=0.1)
    optimizer = adamw_with_cosine((classifier,), 3e-3, optim, 10)["optimizer"]
    optimizer.load_state_dict(checkpoint["optimizer_states"][0])  # as Lightning does
    for group in optimizer.param_groups:
        for p in group["params"]:
            name = next(n for n, q in named.items() if q is p)
            expected = 0.0 if caduceus_exempt(name) or name.endswith("bias") else 0.1
            assert group["weight_decay"] == expected, name
            torch.testing.assert_close(optimizer.state[p]["exp_avg"], moments[name], rtol=0, atol=0)
