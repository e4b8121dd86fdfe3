"""MDLM and AR text checkpoints are scored on the same windows (`genodiff eval --text`), and
the MDLM samples get a generative perplexity from the AR checkpoint (`genodiff gen-ppl`)."""

import json
import math
from pathlib import Path

from genodiff.cli import main

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
TINY = [
    "trainer.max_steps=3",
    "trainer.val_check_interval=3",
    "trainer.enable_progress_bar=false",
    "trainer.enable_model_summary=false",
    "data.max_lines=400",
    "data.max_length=24",
    "data.batch_size=8",
    "data.eval_batch_size=16",
    "tokenizer.vocab_size=200",
    "model.hidden_dim=32",
    "model.n_blocks=1",
    "model.n_heads=2",
    "samples.num_samples=3",
    "samples.length=24",
    "samples.steps=4",
]


def test_mdlm_and_ar_text_checkpoints_share_windows_and_gen_ppl(tmp_path, capsys):
    mdlm, ar = tmp_path / "mdlm", tmp_path / "ar"
    extra = ["model.cond_dim=16", "objective.eval_t_samples=1"]
    assert (
        main(["train", str(CONFIGS / "text_demo.yaml"), *TINY, *extra, f"output_dir={mdlm}"]) == 0
    )
    assert main(["train", str(CONFIGS / "text_demo_ar.yaml"), *TINY, f"output_dir={ar}"]) == 0
    sentences = tmp_path / "heldout.txt"
    sentences.write_text("It was a fine morning.\nShe said nothing at all.\nThey walked home.\n")

    reports = {}
    for name, run in (("mdlm", mdlm), ("ar", ar)):
        capsys.readouterr()
        ckpt = str(run / "checkpoints" / "last.ckpt")
        assert main(["eval", "--checkpoint", ckpt, "--text", str(sentences), "--json"]) == 0
        reports[name] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert reports["mdlm"]["windows"] == reports["ar"]["windows"] == 3
    assert reports["mdlm"]["windows_sha256"] == reports["ar"]["windows_sha256"]  # same tokens
    assert reports["mdlm"]["likelihood"] == "bound" and reports["ar"]["likelihood"] == "exact"

    capsys.readouterr()
    ar_ckpt = str(ar / "checkpoints" / "last.ckpt")
    samples = mdlm / "samples.txt"
    assert main(["gen-ppl", str(samples), "--checkpoint", ar_ckpt, "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    written = [line for line in samples.read_text().splitlines() if line.strip()]
    assert result["samples"] == len(written) >= 1
    assert math.isfinite(result["gen_ppl"]) and result["gen_ppl"] > 1
