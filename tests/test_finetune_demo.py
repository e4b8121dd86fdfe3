"""The shipped demo task (human chr22 vs phage lambda windows) is learnable well above chance."""

import json
from pathlib import Path

import genodiff

ROOT = Path(__file__).resolve().parents[1]
DEMO = str(ROOT / "configs" / "genomic_benchmarks_demo.yaml")


def test_a_small_model_from_scratch_is_far_above_chance_on_the_demo_task(tmp_path):
    # A cut-down budget (2 folds, 2 epochs of batch 8, a 1-layer d32 Caduceus); the full demo
    # config gets 0.955 +- 0.025 over 5 folds (BENCHMARKS.md). Chance is 0.5 (balanced classes).
    overrides = [
        "folds=2",
        "trainer.max_epochs=2",
        "sweep.batch_size=[8]",
        "trainer.enable_progress_bar=false",
        "model.d_model=32",
        "model.n_layer=1",
        "keep_checkpoints=false",
        f"output_dir={tmp_path}",
    ]
    genodiff.finetune(DEMO, overrides, progress=False)
    summary = json.loads((tmp_path / "results.json").read_text())["summary"]["human_vs_phage"]
    assert summary["folds"] == 2
    # 120 balanced test windows: the standard error of accuracy near 0.85 is ~0.03, so 0.75
    # is more than 8 standard errors above chance.
    assert summary["acc_min"] >= 0.75, summary
