"""Sample quality with few sampling steps: diffusion objectives side by side at T steps.

Each ``--checkpoint NAME=CKPT`` (e.g. the MDLM and UDLM rows of ``bench/hg38_table.py``, the
same backbone, tokens and windows) draws ``--num-samples`` sequences of ``--length`` bp with
``--steps`` T in {16, 64, 256} (one seed, its default sampler: MDLM ``cached``, whose draws
follow the ancestral sampler's law at T steps; UDLM ``ancestral``, the exact reverse posterior),
and ``genodiff evaluate-samples`` compares them with real DNA (``--reference``, a FASTA cut into
windows of the same length): k-mer spectrum Jensen-Shannon divergence (k = 3, 6) and the
cross-validated discriminator AUROC (0.5 = indistinguishable from real), and the real-vs-real
6-mer JS with its spread (what real DNA scores in the samples' place). Writes
``few_steps.md`` and ``few_steps.json`` to ``--out``; samples and reports are kept there and
reused, so an interrupted run resumes.

    python bench/few_steps.py --checkpoint MDLM=mdlm.ckpt --checkpoint UDLM=udlm.ckpt \\
        --reference chrX_test.fa --out outputs/few_steps
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", action="append", required=True, help="NAME=CKPT")
    parser.add_argument("--reference", type=Path, required=True, help="real DNA (FASTA)")
    parser.add_argument("--steps", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--num-samples", type=int, default=128)
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--max-reference", type=int, default=512, help="reference windows")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "few_steps")
    return parser.parse_args(argv)


def genodiff(*args: str) -> None:
    """Run one `genodiff` command; stop the benchmark if it fails."""
    print("$ genodiff " + " ".join(args), flush=True)
    quiet = {**os.environ, "GENODIFF_PROGRESS": "0"}
    subprocess.run([sys.executable, "-m", "genodiff.cli", *args], cwd=ROOT, check=True, env=quiet)


def cell(name: str, checkpoint: str, steps: int, args: argparse.Namespace) -> dict:
    """Samples of one model at one step count, and their report's metrics."""
    samples = args.out / "samples" / f"{name}_T{steps}.fa"
    report = args.out / "reports" / f"{name}_T{steps}"
    if not samples.exists():
        genodiff(
            "sample", "--checkpoint", checkpoint, "--num-samples", str(args.num_samples),
            "--length", str(args.length), "--steps", str(steps), "--seed", str(args.seed),
            "--batch-size", str(args.batch_size), "--out", str(samples),
        )  # fmt: skip
    if not (report / "metrics.json").exists():
        genodiff(
            "evaluate-samples", str(samples), "--reference", str(args.reference),
            "--max-reference", str(args.max_reference), "--seed", str(args.seed),
            "--out", str(report),
        )  # fmt: skip
    return json.loads((report / "metrics.json").read_text())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for spec in args.checkpoint:
        name, _, checkpoint = spec.partition("=")
        for steps in args.steps:
            metrics = cell(name, checkpoint, steps, args)
            # None when a side is near-copies of one sequence (genodiff/metrics/suite.py)
            discriminator = metrics["discriminator"] or {"auroc": None, "auroc_sd": None}
            rows.append(
                {
                    "model": name,
                    "steps": steps,
                    "js3": metrics["kmer_js"]["3"],
                    "js6": metrics["kmer_js"]["6"],
                    "auroc": discriminator["auroc"],
                    "auroc_sd": discriminator["auroc_sd"],
                    "real_vs_real_js6": metrics["kmer_js_real_vs_real"]["6"],
                    "real_vs_real_js6_sd": metrics["kmer_js_real_vs_real_sd"]["6"],
                }
            )
    lines = [
        "| model | steps | 3-mer JS | 6-mer JS | AUROC (+- sd over folds) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        auroc = "-" if r["auroc"] is None else f"{r['auroc']:.3f} +- {r['auroc_sd']:.3f}"
        lines.append(f"| {r['model']} | {r['steps']} | {r['js3']:.4f} | {r['js6']:.4f} | {auroc} |")
    floor, spread = rows[0]["real_vs_real_js6"], rows[0]["real_vs_real_js6_sd"]
    table = "\n".join(lines) + (
        f"\n\nReal vs real 6-mer JS (the sampling floor: as many held-out real windows as "
        f"samples, against the same reference pools): {floor:.4f} +- {spread:.4f}\n"
    )
    (args.out / "few_steps.md").write_text(table)
    (args.out / "few_steps.json").write_text(json.dumps(rows, indent=1))
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
