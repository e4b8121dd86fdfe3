"""MDLM and AR text checkpoints are scored on the same windows (`genodiff eval --file`), and
the MDLM samples get a generative perplexity from the AR checkpoint (`genodiff gen-ppl`)."""

import json
import math

from genodiff_text.resources import CONFIGS
from test_text_configs import MDLM_TINY, TINY_TEXT

from genodiff.cli import main


def test_mdlm_and_ar_text_checkpoints_share_windows_and_gen_ppl(tmp_path, capsys):
    mdlm, ar = tmp_path / "mdlm", tmp_path / "ar"
    tiny = [*TINY_TEXT, "samples.num_samples=3"]
    mdlm_args = ["train", str(CONFIGS / "text_demo.yaml"), *tiny, *MDLM_TINY]
    assert main([*mdlm_args, f"output_dir={mdlm}"]) == 0
    assert main(["train", str(CONFIGS / "text_demo_ar.yaml"), *tiny, f"output_dir={ar}"]) == 0
    sentences = tmp_path / "heldout.txt"
    sentences.write_text("It was a fine morning.\nShe said nothing at all.\nThey walked home.\n")

    reports = {}
    for name, run in (("mdlm", mdlm), ("ar", ar)):
        capsys.readouterr()
        ckpt = str(run / "checkpoints" / "last.ckpt")
        assert main(["eval", "--checkpoint", ckpt, "--file", str(sentences), "--json"]) == 0
        reports[name] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert reports["mdlm"]["windows"] == reports["ar"]["windows"] == 3
    assert reports["mdlm"]["windows_sha256"] == reports["ar"]["windows_sha256"]  # same tokens
    assert reports["mdlm"]["likelihood"] == "bound" and reports["ar"]["likelihood"] == "exact"
    # The AR never predicts a window's leading [CLS] (n - 1 tokens per window, upstream's
    # convention); the demo's MDLM (objective.padding=bound) scores every token, [PAD] included
    assert reports["mdlm"]["tokens"] == 3 * reports["mdlm"]["length"] > reports["ar"]["tokens"]
    assert "x[1:]" in reports["ar"]["scoring"]
    assert "[PAD] is corrupted and scored" in reports["mdlm"]["scoring"]

    capsys.readouterr()
    ar_ckpt = str(ar / "checkpoints" / "last.ckpt")
    samples = mdlm / "samples.txt"
    assert main(["gen-ppl", str(samples), "--checkpoint", ar_ckpt, "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    written = [line for line in samples.read_text().splitlines() if line.strip()]
    assert result["samples"] == len(written) >= 1
    assert math.isfinite(result["gen_ppl"]) and result["gen_ppl"] > 1
