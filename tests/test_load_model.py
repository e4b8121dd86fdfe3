"""``genodiff.checkpoints.load_model`` on a checkpoint that Lightning wrote: the state-dict keys
every existing .ckpt holds, the same weights back, and no training code imported to get them."""

import json
import subprocess
import sys

import lightning as L
import pytest
import torch

from genodiff.checkpoints.lightning_io import AtomicCheckpointIO
from genodiff.training.module import GenerativeTrainingModule

CADUCEUS = {"name": "caduceus", "d_model": 16, "n_layer": 1}
CONFIGS = {
    "mdlm": {"model": CADUCEUS, "objective": {"name": "mdlm"}, "ema": {"decay": 0.5}},
    # an objective with parameters of its own, averaged too
    "plaid": {
        "model": CADUCEUS,
        "objective": {"name": "plaid", "d_model": 16, "schedule_hidden": 16},
        "ema": {"decay": 0.5},
    },
}
IDS = torch.randint(7, 11, (2, 24), generator=torch.Generator().manual_seed(3))  # (B, L) bases

# Run in a fresh interpreter: load the checkpoint, score IDS, report what was imported.
LOAD_AND_SCORE = """
import json, sys
import torch
from genodiff.checkpoints import load_model

checkpoint, ids_file, out_file = sys.argv[1:]
model = load_model(checkpoint)
ids = torch.load(ids_file)
with torch.no_grad():
    raw = model.backbone(ids)
    nelbo, _ = model.eval_objective.loss(model.eval_backbone, ids, torch.Generator().manual_seed(0))
torch.save({"raw": raw, "nelbo": nelbo}, out_file)
print(json.dumps({
    "class": type(model).__name__,
    "bases": [cls.__module__ for cls in type(model).__mro__],
    "training_modules": sorted(m for m in sys.modules if m.startswith("genodiff.training")),
}))
"""


def scores(model, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        raw = model.backbone(ids)  # (B, L, V)
        generator = torch.Generator().manual_seed(0)
        nelbo, _ = model.eval_objective.loss(model.eval_backbone, ids, generator)  # (B, L)
    return {"raw": raw, "nelbo": nelbo}


def lightning_checkpoint(config: dict, path) -> GenerativeTrainingModule:
    """A training module whose averaged weights differ from its trained ones, saved by a
    Lightning Trainer (with genodiff's checkpoint IO) as ``genodiff train`` saves it."""
    torch.manual_seed(0)
    module = GenerativeTrainingModule(config)
    averages = [average for average in (module.ema, module.objective_ema) if average is not None]
    with torch.no_grad():
        for average in averages:
            for p in average.module.parameters():
                p.add_(0.05 * torch.randn_like(p))
    trainer = L.Trainer(
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        plugins=[AtomicCheckpointIO()],
    )
    trainer.strategy.connect(module)
    trainer.save_checkpoint(path)
    return module.eval()


@pytest.mark.parametrize("objective", sorted(CONFIGS))
def test_a_lightning_checkpoint_keeps_the_model_keys(tmp_path, objective):
    module = lightning_checkpoint(CONFIGS[objective], tmp_path / "run.ckpt")
    saved = torch.load(tmp_path / "run.ckpt", weights_only=True)["state_dict"]

    def named(prefix, part):
        return {prefix + key for key in part.state_dict()}

    expected = named("backbone.", module.backbone) | named("ema.module.", module.backbone)
    expected.add("ema.n_averaged")
    if objective == "plaid":
        expected |= named("objective.", module.objective)
        expected |= named("objective_ema.module.", module.objective)
        expected.add("objective_ema.n_averaged")
    assert set(saved) == expected


@pytest.mark.parametrize("objective", sorted(CONFIGS))
def test_load_model_gives_the_saved_weights_without_the_training_code(tmp_path, objective):
    module = lightning_checkpoint(CONFIGS[objective], tmp_path / "run.ckpt")
    expected = scores(module, IDS)
    assert not torch.equal(module.backbone(IDS), module.eval_backbone(IDS))  # EMA tells apart
    torch.save(IDS, tmp_path / "ids.pt")
    result = subprocess.run(
        [sys.executable, "-c", LOAD_AND_SCORE, *(str(tmp_path / f) for f in ("run.ckpt", "ids.pt"))]
        + [str(tmp_path / "scores.pt")],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["class"] == "GenerativeModel"
    assert not [name for name in report["bases"] if name.startswith("lightning")]
    assert report["training_modules"] == []
    loaded = torch.load(tmp_path / "scores.pt", weights_only=True)
    for name in ("raw", "nelbo"):
        torch.testing.assert_close(loaded[name], expected[name], rtol=0, atol=0)
