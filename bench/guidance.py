"""Guided generation on the three-species demo: how strongly guidance steers, and what it costs.

Generators (class-conditional, trained on configs/conditional_species.yaml: human chr22, E. coli
536, S. aureus N315; 256-bp windows split by position): MDLM and UDLM on Caduceus-Ph (UDLM's
time-conditioned) and an AR Mamba of the same size. Guidance, gamma in {0, 1, 2, 3, 5} (0 =
p(x), 1 = the conditional model):

- ``MDLM D-CFG (x0)``: classifier-free guidance of the x0 prediction, the unmasking rate kept
  (cached sampler, ``--guidance-form x0``: the reference code's form, D-CFG's default);
- ``MDLM D-CFG (transition)``: the paper's form, the guided transition normalised over every
  outcome, staying masked included (``--guidance-form transition``);
- ``MDLM D-CBG (x0)`` / ``MDLM D-CBG (transition)``: the unconditional prediction (null label)
  tilted by a noisy classifier (first-order form; ``genodiff classifier
  configs/classifier_species.yaml``), in each guidance form (transition: D-CBG's default);
- ``UDLM D-CFG``: classifier-free guidance of the reverse transitions (ancestral sampler);
- ``UDLM D-CBG``: the unconditional transitions tilted by a noisy classifier trained on the
  UDLM generator's uniform noise (first-order form);
- ``AR CFG``: tempered next-token distributions;
- ``AR FUDGE``: next tokens rescored by a causal classifier.

Every cell draws ``--num-samples`` sequences per class and is judged by
``genodiff evaluate-samples --oracle``: an oracle classifier (``genodiff finetune``) trained on
the run's *test* split, which no generator or guidance classifier saw; the real sequences of
each class for k-mer JS and the discriminator are the *validation* split (also unseen). Rows:
oracle accuracy and macro-F1, 3-/6-mer JS and discriminator AUROC averaged over the classes,
mean pairwise 6-mer distance (diversity) and duplicates; below the table, the real-vs-real JS
(what real DNA of each class scores in the samples' place) with its spread. Writes
``guidance.md`` (the table) and ``guidance.png`` (oracle accuracy against 6-mer JS: the
trade-off curve) to ``--workdir``.

Every artefact (generators, classifiers, oracle, samples, reports) is kept in ``--workdir`` and
reused when present, so an interrupted run resumes.

    python bench/guidance.py --workdir outputs/guidance_bench
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "configs/conditional_species.yaml"
CLASSES = ("human", "e_coli", "s_aureus")
# slug -> (name in the table, generator, guidance classifier or None, extra `genodiff sample`
# options). "mdlm-cfg" and "mdlm-cbg" are the x0 form (the samples of an earlier workdir, drawn
# before the forms existed, are that form's).
X0, TRANSITION = ["--guidance-form", "x0"], ["--guidance-form", "transition"]
METHODS = {
    "mdlm-cfg": ("MDLM D-CFG (x0)", "mdlm", None, ["--sampler", "cached", *X0]),
    "mdlm-cfg-transition": (
        "MDLM D-CFG (transition)",
        "mdlm",
        None,
        ["--sampler", "cached", *TRANSITION],
    ),
    "mdlm-cbg": ("MDLM D-CBG (x0)", "mdlm", "noisy", ["--sampler", "cached", *X0]),
    "mdlm-cbg-transition": (
        "MDLM D-CBG (transition)",
        "mdlm",
        "noisy",
        ["--sampler", "cached", *TRANSITION],
    ),
    "udlm-cfg": ("UDLM D-CFG", "udlm", None, []),
    "udlm-cbg": ("UDLM D-CBG", "udlm", "noisy_udlm", []),
    "ar-cfg": ("AR CFG", "ar", None, []),
    "ar-fudge": ("AR FUDGE", "ar", "causal", []),
}
MAMBA = [
    "model=mamba",
    "model.d_model=64",
    "model.n_layer=2",
]  # the AR model and FUDGE's classifier


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=ROOT / "outputs" / "guidance_bench")
    parser.add_argument("--gammas", type=float, nargs="+", default=[0, 1, 2, 3, 5])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--num-samples", type=int, default=32, help="per class and cell")
    parser.add_argument(
        "--steps", type=int, default=64, help="MDLM and UDLM sampling steps (AR takes none)"
    )
    parser.add_argument("--batch-size", type=int, default=32, help="sequences per network call")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def genodiff(*args: str) -> None:
    """Run one `genodiff` command from the repository root; stop the benchmark if it fails."""
    command = [sys.executable, "-m", "genodiff.cli", *args]
    print("$ genodiff " + " ".join(args), flush=True)
    quiet = {**os.environ, "GENODIFF_PROGRESS": "0"}  # no progress display in the log
    subprocess.run(command, cwd=ROOT, check=True, env=quiet)


def last_checkpoint(run: Path) -> Path:
    return run / "checkpoints" / "last.ckpt"


# what trains each model: (run folder name, `genodiff` arguments before output_dir=)
TRAINING = {
    "mdlm": ("mdlm", ["train", CONFIG]),
    "ar": ("ar", ["train", CONFIG, *MAMBA, "objective=ar", "name=conditional_species_ar"]),
    "udlm": (
        "udlm",
        [
            "train",
            CONFIG,
            "objective=udlm",
            "model.time_conditioning=true",
            "name=conditional_species_udlm",
        ],
    ),
    "noisy": ("classifier_noisy", ["classifier", "configs/classifier_species.yaml"]),
    "noisy_udlm": ("classifier_noisy_udlm", ["classifier", "configs/classifier_species.yaml"]),
    "causal": (
        "classifier_causal",
        ["classifier", "configs/classifier_species.yaml", "kind=causal", *MAMBA],
    ),
}


# classifier -> the generator it is trained for: a noisy classifier learns from that generator's
# forward process (masked or uniform noise); a causal one from the AR model FUDGE guides (its
# tokenizer and classes are checked)
CLASSIFIER_GENERATOR = {"noisy": "mdlm", "noisy_udlm": "udlm", "causal": "ar"}


def prepare(work: Path, methods: list[str]) -> dict[str, Path]:
    """Train (or find) the generators and guidance classifiers ``methods`` need, and the
    oracle."""
    needed = []
    for method in methods:
        needed += [m for m in METHODS[method][1:3] if m is not None]
    paths = {}
    for model in dict.fromkeys(needed):  # each generator before its classifiers
        folder, command = TRAINING[model]
        paths[model] = last_checkpoint(work / folder)
        if not paths[model].exists():
            generator = CLASSIFIER_GENERATOR.get(model)
            extra = [f"generator={paths[generator]}"] if generator else []
            genodiff(*command, *extra, f"output_dir={work / folder}")
    oracle_data, reference = work / "oracle_data", work / "reference"
    if not (oracle_data / "manifest.json").exists():
        genodiff("data", "labelled-split", CONFIG, "--split", "test", "--dest", str(oracle_data))
    if not (reference / "manifest.json").exists():
        genodiff("data", "labelled-split", CONFIG, "--split", "valid", "--dest", str(reference))
    oracle = work / "oracle"
    found = sorted(oracle.glob("runs/*/*/fold0/checkpoints/best-*.ckpt"))
    if not found:
        genodiff(
            "finetune",
            "configs/oracle_species.yaml",
            f"benchmark.root={oracle_data}",
            f"output_dir={oracle}",
        )
        found = sorted(oracle.glob("runs/*/*/fold0/checkpoints/best-*.ckpt"))
    paths["oracle"] = found[0]
    paths["reference"] = reference / "reference"
    return paths


def cell(work: Path, paths: dict[str, Path], method: str, gamma: float, args) -> dict:
    """Samples of every class for one (method, gamma), and their oracle report."""
    _, generator, kind, options = METHODS[method]
    name = f"{method}_g{gamma:g}"
    report = work / "reports" / name
    if not (report / "metrics.json").exists():
        files = []
        for label in CLASSES:
            out = work / "samples" / f"{name}_{label}.fa"
            if not out.exists():
                sample = ["sample", "--checkpoint", str(paths[generator]), "--label", label]
                sample += ["--guidance", f"{gamma:g}", "--num-samples", str(args.num_samples)]
                sample += ["--length", "256", "--seed", str(args.seed)]
                sample += ["--batch-size", str(args.batch_size)]
                if generator != "ar":  # the AR sampler draws one base per step: no steps
                    sample += ["--steps", str(args.steps)]
                if kind is not None:
                    sample += ["--classifier", str(paths[kind])]
                genodiff(*sample, *options, "--out", str(out))
            files.append(out)
        merged = work / "samples" / f"{name}.fa"
        merged.write_text("".join(f.read_text() for f in files))
        references = [f"--reference={c}={paths['reference'] / (c + '.fa')}" for c in CLASSES]
        genodiff(
            "evaluate-samples", str(merged), *references, "--oracle", str(paths["oracle"]),
            "--out", str(report),
        )  # fmt: skip
    return json.loads((report / "metrics.json").read_text())


def summary(metrics: dict) -> dict[str, float]:
    """The row of one cell: oracle scores, class-averaged JS / AUROC, diversity, and the
    real-vs-real JS (the same in every cell: the classes' held-out real windows against the
    reference pools the samples are compared with) with the sd of its class average."""
    per_class = metrics["kmer_js"]
    real, real_sd = metrics["kmer_js_real_vs_real"], metrics["kmer_js_real_vs_real_sd"]
    auroc = metrics["discriminator_auroc"]
    mean = lambda values: sum(values) / len(values)  # noqa: E731

    def spread(k: str) -> float:  # the sd of the class average: sqrt(sum of sd^2) / classes
        return sum(real_sd[c][k] ** 2 for c in CLASSES) ** 0.5 / len(CLASSES)

    return {
        "oracle_accuracy": metrics["oracle_accuracy"],
        "oracle_macro_f1": metrics["oracle_macro_f1"],
        "by_class": [metrics["samples"]["per_class"][c]["oracle_accuracy"] for c in CLASSES],
        "js3": mean([per_class[c]["3"] for c in CLASSES]),
        "js6": mean([per_class[c]["6"] for c in CLASSES]),
        # None where a class's samples are near-copies of one sequence (metrics/suite.py)
        "auroc": None if None in auroc.values() else mean([auroc[c] for c in CLASSES]),
        "distance": mean([metrics["pairwise_kmer_distance"][c]["samples"] for c in CLASSES]),
        "duplicates": mean([metrics["duplicate_rate"][c]["samples"] for c in CLASSES]),
        "real_js3": mean([real[c]["3"] for c in CLASSES]),
        "real_js3_sd": spread("3"),
        "real_js6": mean([real[c]["6"] for c in CLASSES]),
        "real_js6_sd": spread("6"),
        "real_js6_by_class": [(real[c]["6"], real_sd[c]["6"]) for c in CLASSES],
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    paths = prepare(work, args.methods)
    rows = []
    for method in args.methods:
        for gamma in args.gammas:
            metrics = cell(work, paths, method, gamma, args)
            rows.append((METHODS[method][0], gamma, summary(metrics)))
    lines = [
        f"| method | gamma | oracle acc | oracle macro-F1 | acc {' / '.join(CLASSES)} "
        "| 3-mer JS | 6-mer JS | AUROC | pairwise 6-mer distance | duplicates |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for method, gamma, r in rows:
        auroc = "-" if r["auroc"] is None else f"{r['auroc']:.3f}"
        lines.append(
            f"| {method} | {gamma:g} | {r['oracle_accuracy']:.3f} | {r['oracle_macro_f1']:.3f} "
            f"| {' / '.join(f'{a:.2f}' for a in r['by_class'])} "
            f"| {r['js3']:.4f} | {r['js6']:.4f} | {auroc} | {r['distance']:.3f} "
            f"| {r['duplicates']:.3f} |"
        )
    r = rows[0][2]
    by_class = ", ".join(
        f"{c} {m:.4f} +- {sd:.4f}"
        for c, (m, sd) in zip(CLASSES, r["real_js6_by_class"], strict=True)
    )
    lines += [
        "",
        f"Real vs real, class-averaged (as many held-out real windows per class as samples, "
        f"against the same reference pools; mean +- sd): 3-mer JS {r['real_js3']:.4f} +- "
        f"{r['real_js3_sd']:.4f}, 6-mer JS {r['real_js6']:.4f} +- {r['real_js6_sd']:.4f} "
        f"(6-mer by class: {by_class})",
    ]
    table = "\n".join(lines)
    (work / "guidance.md").write_text(table + "\n")
    (work / "guidance.json").write_text(json.dumps([[m, g, r] for m, g, r in rows], indent=1))
    plot(rows, work / "guidance.png")
    print(table)
    print(f"total {time.perf_counter() - started:.0f} s; wrote {work / 'guidance.md'}")
    return 0


def plot(rows, path: Path) -> None:
    """Oracle accuracy (x) against class-averaged 6-mer JS (y), one line per method, over the
    band real DNA reaches (real vs real, +- sd)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for method in dict.fromkeys(m for m, _, _ in rows):
        points = [(g, r) for m, g, r in rows if m == method]
        x = [r["oracle_accuracy"] for _, r in points]
        y = [r["js6"] for _, r in points]
        axes.plot(x, y, marker="o", label=method)
        for (g, _), xi, yi in zip(points, x, y, strict=True):
            axes.annotate(f"{g:g}", (xi, yi), textcoords="offset points", xytext=(3, 3))
    real = rows[0][2]
    axes.axhspan(
        real["real_js6"] - real["real_js6_sd"],
        real["real_js6"] + real["real_js6_sd"],
        color="grey",
        alpha=0.25,
        label="real vs real (+- sd)",
    )
    axes.set_xlabel("oracle accuracy on the samples")
    axes.set_ylabel("6-mer JS to real sequences of the class (bits)")
    axes.set_title("Guidance trade-off (labels: gamma)")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


if __name__ == "__main__":
    raise SystemExit(main())
