"""Pieces of the training loop with known answers: LR schedule, EMA (alone and in a run with
accumulated batches), NaN guard, optimizer groups."""

import math
import warnings

import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

import genodiff
from genodiff import cli
from genodiff.backbones.rcps import RCPSEmbedding
from genodiff.config import load_config
from genodiff.config_values import ConfigError
from genodiff.errors import UserInputWarning
from genodiff.model import EMA, backbone_size
from genodiff.training import fit_run, run_checks
from genodiff.training.module import GenerativeTrainingModule
from genodiff.training.optim import cosine_with_warmup
from genodiff.training.run_checks import (
    check_ema_precision,
    warn_ema_stays_near_init,
    warn_gpu_scale_on_cpu,
)
from tests.test_cli import DEMO, ROOT
from tests.test_resume import BASE


def test_cosine_with_warmup_values():
    assert cosine_with_warmup(0, 10, 110, 0.1) == pytest.approx(0.1)
    assert cosine_with_warmup(9, 10, 110, 0.1) == pytest.approx(1.0)
    assert cosine_with_warmup(10, 10, 110, 0.1) == pytest.approx(1.0)
    assert cosine_with_warmup(60, 10, 110, 0.1) == pytest.approx(0.1 + 0.9 * 0.5)
    assert cosine_with_warmup(110, 10, 110, 0.1) == pytest.approx(0.1)
    assert cosine_with_warmup(500, 10, 110, 0.1) == pytest.approx(0.1)
    assert cosine_with_warmup(5, 0, 10, 0.0) == pytest.approx(0.5 * (1 + math.cos(math.pi / 2)))


def test_ema_constant_decay_matches_closed_form():
    model = nn.Linear(1, 1, bias=False)
    ema = EMA(model, decay=0.9, warmup=False)
    values = [1.0, 2.0, 3.0]
    expected = None
    for v in values:
        with torch.no_grad():
            model.weight.fill_(v)
        ema.update_parameters(model)
        # the first update copies; later ones blend with weight 1 - decay
        expected = v if expected is None else 0.9 * expected + 0.1 * v
    assert ema.module.weight.item() == pytest.approx(expected)
    assert not ema.module.weight.requires_grad


def test_ema_of_a_model_with_an_integer_buffer():
    # Caduceus-PS keeps its complement map as a long buffer: lerp_ has no integer kernel, so
    # the second update (the first average) raised NotImplementedError and training stopped.
    complement = torch.tensor([0, 1, 2, 3, 4, 5, 6, 10, 9, 8, 7, 11])
    model = RCPSEmbedding(12, 4, complement)
    ema = EMA(model, decay=0.5, warmup=False)
    weights = []
    for _ in range(3):
        with torch.no_grad():
            model.embedding.weight.normal_()
        weights.append(model.embedding.weight.clone())
        ema.update_parameters(model)
    expected = 0.5 * (0.5 * weights[0] + 0.5 * weights[1]) + 0.5 * weights[2]
    # float32 sums of unit-size weights round to ~1e-7 (allclose's default atol, 1e-8, failed
    # on weights near 0 for 8 of 300 seeds); a wrong average is off by ~0.1 or more
    assert torch.allclose(ema.module.embedding.weight, expected, rtol=1e-5, atol=1e-6)
    assert torch.equal(ema.module.complement_map, complement)


def test_ema_warmup_uses_smaller_decay_early():
    model = nn.Linear(1, 1, bias=False)
    ema = EMA(model, decay=0.9999, warmup=True)
    with torch.no_grad():
        model.weight.fill_(0.0)
    ema.update_parameters(model)  # copy: n_averaged becomes 1
    with torch.no_grad():
        model.weight.fill_(1.0)
    ema.update_parameters(model)  # k = 1: decay = 2 / 11
    assert ema.module.weight.item() == pytest.approx(1 - 2 / 11)


def test_ema_averages_once_per_optimizer_step_with_accumulated_batches(tmp_path, monkeypatch):
    accumulate, steps, decay = 2, 3, 0.5
    before_batch = []  # the backbone's weights before each training batch
    original = GenerativeTrainingModule.training_step

    def recording(self, batch, batch_idx):
        before_batch.append({k: v.clone() for k, v in self.backbone.state_dict().items()})
        return original(self, batch, batch_idx)

    monkeypatch.setattr(GenerativeTrainingModule, "training_step", recording)
    overrides = [
        *BASE,
        f"trainer.max_steps={steps}",
        f"trainer.accumulate_grad_batches={accumulate}",
        f"ema.decay={decay}",
        "ema.warmup=false",
    ]
    genodiff.train(DEMO, overrides, output_dir=tmp_path)
    state = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    assert len(before_batch) == accumulate * steps
    # The weights after optimizer step k: before batch k * accumulate, or the final ones.
    final = {k[len("backbone.") :]: v for k, v in state.items() if k.startswith("backbone.")}
    after_step = before_batch[accumulate::accumulate] + [final]
    assert int(state["ema.n_averaged"]) == steps
    for name, first in after_step[0].items():
        if not first.is_floating_point():
            continue
        expected = first  # the first average copies the weights, later ones blend them in
        for weights in after_step[1:]:
            expected = decay * expected + (1 - decay) * weights[name]
        torch.testing.assert_close(state[f"ema.module.{name}"], expected)


def test_an_average_of_bfloat16_weights_never_moves():
    # Why 16-bit weights and an EMA are refused below: each step adds (1 - decay) (w - avg),
    # here 1e-4 of a 1.0 gap, far below half a bfloat16 ulp of 1.0 (2^-8): rounding drops it.
    model = nn.Linear(1, 1, bias=False).to(torch.bfloat16)
    ema = EMA(model, decay=0.9999, warmup=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    ema.update_parameters(model)  # the first update copies
    with torch.no_grad():
        model.weight.fill_(2.0)
    for _ in range(100):
        ema.update_parameters(model)
    assert 1 + (1 - 0.9999**100) > 1.0099  # float32's average after these steps
    assert ema.module.weight.item() == 1.0


@pytest.mark.parametrize("precision", ["bf16-true", "16-true"])
def test_sixteen_bit_weights_with_an_average_are_refused_before_any_write(tmp_path, precision):
    out = tmp_path / "run"
    overrides = [*BASE, "trainer.max_steps=2", f"trainer.precision={precision}"]
    with pytest.raises(ConfigError, match="trainer.precision=.*ema.decay=0"):
        genodiff.train(DEMO, overrides, output_dir=out)
    assert not out.exists()


def test_an_average_of_decay_one_without_warmup_never_moves_and_is_refused(tmp_path):
    # Why: each update adds (1 - decay) (w - avg) = 0; with the warm-up, update k takes
    # (1 + k) / (10 + k) instead, and the average moves.
    model = nn.Linear(1, 1, bias=False)
    still, warmed = EMA(model, decay=1.0, warmup=False), EMA(model, decay=1.0, warmup=True)
    with torch.no_grad():
        model.weight.fill_(1.0)
    for ema in (still, warmed):
        ema.update_parameters(model)  # the first update copies
    with torch.no_grad():
        model.weight.fill_(2.0)
    for ema in (still, warmed):
        ema.update_parameters(model)
    assert still.module.weight.item() == 1.0
    assert warmed.module.weight.item() == pytest.approx(1 + (1 - 2 / 11))  # k = 1 at this update
    # Was: trained, and validated, tested and sampled the initial weights without a word.
    out = tmp_path / "run"
    overrides = [*BASE, "trainer.max_steps=2", "ema.decay=1", "ema.warmup=false"]
    with pytest.raises(ConfigError, match=r"ema\.decay=1 keeps the averaged weights"):
        genodiff.train(DEMO, overrides, output_dir=out)
    assert not out.exists()


def test_an_average_that_keeps_most_initial_weights_at_the_end_is_warned(tmp_path, capsys):
    # Why: the hg38 recipe's ema.decay 0.9999 without warm-up, run at demo scale (trainer=cpu:
    # 400 steps, as docs/reproducing_the_paper.md showed for the baselines), validates, tests
    # and samples an average that is 0.9999^400 = 96% the initial weights. Was: not a word.
    hg38_ar = str(ROOT / "configs" / "hg38_ar_mamba.yaml")
    ar = ["data=demo", "trainer=cpu", "model.d_model=16", "model.n_layer=1"]
    overrides = [*ar, *(o for o in BASE if not o.startswith("model=")), "trainer.max_steps=4"]
    assert cli.main(["train", hg38_ar, *overrides, f"output_dir={tmp_path / 'a'}"]) == 0
    err = capsys.readouterr().err
    # 0.9999^4 = 0.99960; with ema.decay=0.9: 0.9^4 = 0.6561
    # (was "100.0%", as if the run trained nothing at all)
    assert "warning: ema.decay=0.9999 without ema.warmup leaves 99.96% of the initial" in err
    assert "after trainer.max_steps=4 steps" in err and "ema.warmup=true" in err
    with pytest.warns(
        UserInputWarning, match=r"ema\.decay=0\.9 without ema\.warmup leaves 65\.61%"
    ):
        warn_ema_stays_near_init(0.9, False, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_ema_stays_near_init(0.9, True, 4)  # the warm-up's early updates take ~1/10 or more
        warn_ema_stays_near_init(0.5, False, 4)  # 0.5^4 = 6.25% of the initial weights left
        warn_ema_stays_near_init(0.9999, False, 50_000)  # trainer=gpu: e^-5 = 0.7%
        warn_ema_stays_near_init(0.0, False, 4)  # no average
        warn_ema_stays_near_init(0.9999, False, -1)  # no step limit


def test_sixteen_bit_weights_without_an_average_pass_the_check():
    check_ema_precision("bf16-true", 0.0)
    check_ema_precision("bf16-mixed", 0.9999)
    check_ema_precision("32-true", 0.9999)


class StartedError(Exception):
    """Raised in place of the training, once every check and warning before it is done."""


def warnings_before_training(monkeypatch, overrides: list[str], out) -> list[str]:
    """genodiff's warnings of a demo run with ``overrides``, up to its training (not run)."""

    def started(*args, **kwargs):
        raise StartedError

    monkeypatch.setattr(fit_run, "fit", started)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(StartedError):
            genodiff.train(DEMO, overrides, output_dir=out, progress=False)
    return [str(w.message) for w in caught if issubclass(w.category, UserInputWarning)]


def test_a_gpu_sized_run_on_the_cpu_is_warned_of_before_it_trains(monkeypatch, tmp_path):
    """configs/hg38.yaml's scale (Caduceus-Ph, 50,000 steps of 128 x 8 windows of 1,024 bp:
    52.4 billion tokens) on the CPU is said before training (was: months, with only the
    progress line's ETA to tell); configs/demo.yaml (6.6 million tokens) is not."""
    assert warnings_before_training(monkeypatch, [], tmp_path / "demo") == []
    hg38_scale = [
        "model=caduceus_ph",
        "data.batch_size=128",
        "trainer.accumulate_grad_batches=8",
        "trainer.max_steps=50000",
    ]
    said = warnings_before_training(monkeypatch, hg38_scale, tmp_path / "hg38")
    assert len(said) == 1, said
    assert said[0].startswith("this run is sized for GPUs: trainer.max_steps=50,000 steps of")
    assert "1,024 windows of 1,024 tokens (5.24e+10 tokens) through 470,702 weights" in said[0]
    assert "train configs/demo.yaml for a run on the CPU, or lower trainer.max_steps" in said[0]
    # 6 x 470,702 weights x 5.24e10 tokens at 1e10 operations a second: 171 days
    assert "takes about 171 days" in said[0]


def test_the_gpu_scale_warning_speaks_above_a_day_on_the_cpu():
    # the demo: 400 steps of 16 windows of 1,024 bp through 82,624 weights (5 min on 2 cores)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_gpu_scale_on_cpu(400, 16, 1024, 82_624)
        warn_gpu_scale_on_cpu(-1, 1024, 1024, 470_702)  # no step limit
        warn_gpu_scale_on_cpu(50_000, 1024, None, 470_702)  # no window length
        warn_gpu_scale_on_cpu(1, 1, 14_400, 1_000_000)  # 6 x 1e6 x 14,400 / 1e10 = 8.6 s
    # 6 x 1e6 weights x 1.44e9 tokens at 1e10 operations a second = 864,000 s: 10 days
    with pytest.warns(UserInputWarning, match=r"takes about 10 days"):
        warn_gpu_scale_on_cpu(1_000, 1_440, 1_000, 1_000_000)


def test_the_gpu_scale_warning_says_its_days_are_an_estimate_at_its_pace(monkeypatch):
    """The days are counted at a fixed pace, not this machine's, and the message says which
    (was: "at the pace of configs/demo.yaml", no number). A pace set in its place counts."""
    # 6 x 1e6 weights x 1.2e8 tokens = 7.2e14 operations: 20 hours at 1e10 a second
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_gpu_scale_on_cpu(1_000, 120, 1_000, 1_000_000)
    with pytest.warns(UserInputWarning) as said:
        warn_gpu_scale_on_cpu(1_000, 1_440, 1_000, 1_000_000)  # 10 days, as above
    assert "takes about 10 days (an estimate at 1e+10 operations a second," in str(said[0].message)
    # a slow or busy CPU, 2.5e9 a second: 7.2e14 / 2.5e9 = 288,000 s, 3.3 days
    monkeypatch.setattr(run_checks, "CPU_OPERATIONS_PER_SECOND", 2.5e9)
    with pytest.warns(UserInputWarning) as said:
        warn_gpu_scale_on_cpu(1_000, 120, 1_000, 1_000_000)
    assert "takes about 3 days (an estimate at 2.5e+09 operations a second," in str(said[0].message)


@pytest.mark.parametrize(
    "config", ["demo.yaml", *sorted(p.name for p in (ROOT / "configs").glob("hg38*.yaml"))]
)
def test_the_hg38_recipes_on_one_cpu_are_warned_of_and_the_demo_is_not(config):
    """Each config's own numbers on one process: configs/demo.yaml (400 steps of 16 windows of
    1,024 bp, 82,624 weights) trains in minutes; every hg38 recipe (50,000 steps of 128 x 8
    windows of 1,024 bp, ~470 K weights) would take months."""
    cfg = load_config(ROOT / "configs" / config)
    model = OmegaConf.to_container(cfg.model, resolve=True)
    weights, _ = backbone_size({**model, "vocab_size": 16})
    t = cfg.trainer
    windows = cfg.data.batch_size * (t.get("accumulate_grad_batches") or 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_gpu_scale_on_cpu(t.max_steps, windows, cfg.data.max_length, weights)
    said = [str(w.message) for w in caught]
    if config == "demo.yaml":
        assert said == []
    else:
        assert len(said) == 1 and "trainer.max_steps=50,000 steps of 1,024 windows" in said[0]


def test_a_resumed_run_is_not_warned_of_again(monkeypatch, tmp_path):
    """The CPU-run warning is said when a run begins, not on each resume of it (it counted the
    whole of trainer.max_steps, however few steps were left)."""
    run = tmp_path / "run"
    genodiff.train(DEMO, [*BASE, "trainer.max_steps=2"], output_dir=run, progress=False)
    endless = [*BASE, "trainer.max_steps=10000000"]  # 5.1e9 tokens of the tiny model: 290 days
    (fresh,) = warnings_before_training(monkeypatch, endless, tmp_path / "fresh")
    assert fresh.startswith("this run is sized for GPUs: trainer.max_steps=10,000,000 steps")
    resumed = [*endless, f"ckpt_path={run / 'checkpoints' / 'last.ckpt'}"]
    assert warnings_before_training(monkeypatch, resumed, run) == []
