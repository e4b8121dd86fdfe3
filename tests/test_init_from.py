"""init_from=DIR: start training from the backbone weights of a Hugging-Face-format folder."""

import pytest
import torch
from omegaconf import OmegaConf

import genodiff
from genodiff import cli
from genodiff.backbones import build
from genodiff.checkpoints import folders, init_backbones, read_checkpoint_file, save_pretrained
from genodiff.config import load_config
from genodiff.model import GenerativeModel
from genodiff.training import fit_run as training_fit
from tests.test_cli import DEMO, TINY
from tests.test_open_checkpoint import next_global_draws, seed_the_global_generators

TINY_CADUCEUS = dict(name="caduceus", d_model=64, n_layer=2, vocab_size=12)


def pretrained_folder(tmp_path, seed: int, **model_kwargs):
    torch.manual_seed(seed)
    model = build(**{**TINY_CADUCEUS, **model_kwargs})
    return save_pretrained(model, tmp_path / f"pretrained_{seed}"), model.state_dict()


def test_training_starts_from_the_folder_weights(tmp_path):
    folder, weights = pretrained_folder(tmp_path, seed=123)
    out = tmp_path / "run"
    # lr 0: the weights written at the end are exactly the ones training started from.
    overrides = [*TINY, "trainer.max_steps=1", "optim.lr=0", "samples.num_samples=0"]
    genodiff.train(DEMO, [*overrides, f"init_from={folder}"], output_dir=out)
    state = read_checkpoint_file(out / "checkpoints" / "last.ckpt")["state_dict"]
    for key, value in weights.items():
        assert torch.equal(state[f"backbone.{key}"], value), key
        assert torch.equal(state[f"ema.module.{key}"], value), key


def test_without_init_from_the_weights_differ(tmp_path):
    _, weights = pretrained_folder(tmp_path, seed=123)
    out = tmp_path / "run"
    overrides = [*TINY, "trainer.max_steps=1", "optim.lr=0", "samples.num_samples=0"]
    genodiff.train(DEMO, overrides, output_dir=out)
    state = read_checkpoint_file(out / "checkpoints" / "last.ckpt")["state_dict"]
    assert not torch.equal(
        state["backbone.backbone.embeddings.word_embeddings.weight"],
        weights["backbone.embeddings.word_embeddings.weight"],
    )


def test_a_folder_of_another_size_is_a_clear_error(tmp_path, capsys):
    folder, _ = pretrained_folder(tmp_path, seed=0, d_model=32)
    out = tmp_path / "run"
    overrides = [*TINY, "trainer.max_steps=1", f"init_from={folder}", f"output_dir={out}"]
    assert cli.main(["train", DEMO, *overrides]) == 2
    err = capsys.readouterr().err
    assert "init_from" in err and "tensors of another shape" in err and "\n" not in err.strip()
    assert not (out / "checkpoints").exists()  # nothing written for a run that cannot start


def test_a_missing_folder_is_a_clear_error(tmp_path, capsys):
    overrides = [*TINY, f"init_from={tmp_path / 'nowhere'}", f"output_dir={tmp_path / 'run'}"]
    assert cli.main(["train", DEMO, *overrides]) == 2
    assert "nowhere" in capsys.readouterr().err


def test_init_backbone_copies_every_weight_of_the_folder(tmp_path):
    folder, weights = pretrained_folder(tmp_path, seed=1)
    cfg = load_config(DEMO, TINY)
    model = GenerativeModel(OmegaConf.to_container(cfg, resolve=True))
    before = model.backbone.state_dict()
    assert not all(torch.equal(before[key], value) for key, value in weights.items())
    init_backbones([model.backbone], folder)
    state = model.backbone.state_dict()
    assert state.keys() == weights.keys()
    for key, value in weights.items():
        assert torch.equal(state[key], value), key


def test_init_backbone_leaves_the_global_random_state_as_it_was(tmp_path):
    """Reading the folder builds a model whose initial weights are discarded: the caller's
    seeded generators draw after it what they draw without it."""
    folder, _ = pretrained_folder(tmp_path, seed=1)
    backbone = build(**TINY_CADUCEUS)
    seed_the_global_generators(5)
    without_a_load = next_global_draws()
    seed_the_global_generators(5)
    init_backbones([backbone], folder)
    assert next_global_draws() == without_a_load


class StartedError(Exception):
    """Raised in place of the training, once the start path is done."""


def random_state_at_the_fit(monkeypatch, overrides: list[str], out) -> torch.Tensor:
    """torch's global random state when ``genodiff.train`` hands the model to the Trainer."""
    states = []

    def recording_fit(*args, **kwargs):
        states.append(torch.get_rng_state())
        raise StartedError

    monkeypatch.setattr(training_fit, "fit", recording_fit)
    with pytest.raises(StartedError):
        genodiff.train(DEMO, [*TINY, "trainer.max_steps=1", *overrides], output_dir=out)
    return states[0]


def test_a_run_with_init_from_draws_what_the_same_run_from_scratch_draws(tmp_path, monkeypatch):
    """Pretrained against from scratch is a paired comparison: after the seed, both runs'
    masks, noise levels and data order come from the same random state."""
    folder, _ = pretrained_folder(tmp_path, seed=123)
    scratch = random_state_at_the_fit(monkeypatch, [], tmp_path / "scratch")
    pretrained = random_state_at_the_fit(monkeypatch, [f"init_from={folder}"], tmp_path / "pre")
    assert torch.equal(pretrained, scratch)


def test_a_run_reads_the_folder_once_for_the_backbone_and_its_average(tmp_path, monkeypatch):
    """Was: the folder (or Hub download) read and its model built once per copy."""
    folder, weights = pretrained_folder(tmp_path, seed=7)
    reads = []
    real_load = folders.load_pretrained

    def counting_load(reference, **kwargs):
        reads.append(reference)
        return real_load(reference, **kwargs)

    monkeypatch.setattr(folders, "load_pretrained", counting_load)
    captured = {}

    def capturing_fit(trainer, model, *args, **kwargs):
        captured["model"] = model
        raise StartedError

    monkeypatch.setattr(training_fit, "fit", capturing_fit)
    with pytest.raises(StartedError):
        genodiff.train(
            DEMO, [*TINY, "trainer.max_steps=1", f"init_from={folder}"], output_dir=tmp_path / "run"
        )
    assert len(reads) == 1
    model = captured["model"]
    assert model.ema is not None  # both copies filled from the one read
    for copy in (model.backbone, model.ema.module):
        state = copy.state_dict()
        for key, value in weights.items():
            assert torch.equal(state[key], value), key


def test_a_folder_of_another_size_is_refused_naming_the_settings_that_differ(tmp_path, capsys):
    # caduceus_tiny: 64 x 2, residual_in_fp32 false (Caduceus' own default: true)
    folder, _ = pretrained_folder(tmp_path, 0, d_model=32, n_layer=1, residual_in_fp32=False)
    out = tmp_path / "run"
    overrides = [*TINY, f"init_from={folder}", f"output_dir={out}"]
    assert cli.main(["train", DEMO, *overrides]) == 2
    err = capsys.readouterr().err
    # was: only the tensors that do not fit, the sizes they come from left to guess
    assert err.startswith(
        "genodiff train: error: d_model: 64 in the model config, 32 in the folder; "
        "n_layer: 2 in the model config, 1 in the folder; init_from="
    )


def test_a_mistyped_model_name_is_said_with_the_name_meant(tmp_path, capsys):
    overrides = [*TINY, "init_from=mdlm-chrz", f"output_dir={tmp_path / 'run'}"]
    assert cli.main(["train", DEMO, *overrides]) == 2
    err = capsys.readouterr().err.strip()
    # was: "<working directory>/mdlm-chrz: not found", the name resolved as a path
    assert err.startswith("genodiff train: error: mdlm-chrz: not found") and "\n" not in err
    assert err.endswith("did you mean mdlm-chrx?")
