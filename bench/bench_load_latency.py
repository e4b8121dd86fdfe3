"""How long a fresh Python process takes to load a model and draw its first sample, and what it
imports on the way: this checkout against another commit's tree, in one run.

Each row is a fresh ``python -c`` process (best of ``--repeats``), timing in turn:
``import genodiff`` with the first ``genodiff.load`` access (the front door's module),
``genodiff.load(CHECKPOINT)``, the first ``generate`` (``--num-samples`` x ``--length`` bp,
``--steps`` steps) and the first ``score`` of those samples; then it counts the modules loaded
and names the heavy packages among them (Lightning, Hydra, scikit-learn, matplotlib, SciPy).
The checkpoint is the one given, or a 2-step run of ``configs/demo_quick.yaml`` trained first
(the weights do not change the times). ``--before REV`` extracts that commit's ``genodiff/``
(``git archive``) and times it on the same checkpoint, rows interleaved.

    python bench/bench_load_latency.py [--checkpoint outputs/demo] [--before REV] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("lightning", "hydra", "sklearn", "matplotlib", "scipy")

# What each process runs: the times of its stages, its module count and heavy packages.
PROBE = """
import json, sys, time
start = time.perf_counter()
import genodiff
genodiff.load
imported = time.perf_counter()
model = genodiff.load(sys.argv[1])
loaded = time.perf_counter()
samples = model.generate(int(sys.argv[2]), length=int(sys.argv[3]), steps=int(sys.argv[4]))
generated = time.perf_counter()
model.score(list(samples))
scored = time.perf_counter()
tops = {name.split(".")[0] for name in sys.modules}
print(json.dumps({
    "import": imported - start, "load": loaded - imported, "generate": generated - loaded,
    "score": scored - generated, "modules": len(sys.modules),
    "heavy": sorted(tops & set(sys.argv[5].split(","))), "package": genodiff.__file__,
}))
"""


def tree_of(rev: str, into: Path) -> Path:
    """``rev``'s ``genodiff/`` package extracted into ``into`` (a path for PYTHONPATH)."""
    archive = subprocess.run(
        ["git", "archive", rev, "genodiff"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def demo_checkpoint(folder: Path) -> Path:
    """A 2-step run of the quick demo (its weights do not change the times)."""
    command = [sys.executable, "-m", "genodiff.cli", "train", "demo_quick"]
    command += ["trainer.max_steps=2", "samples.num_samples=0", "evaluate_test=false"]
    subprocess.run([*command, f"output_dir={folder}"], check=True, capture_output=True)
    return folder


def probe(tree: Path, checkpoint: Path, args: argparse.Namespace) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "GENODIFF_PROGRESS": "0"}
    argv = [str(checkpoint), str(args.num_samples), str(args.length), str(args.steps)]
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", PROBE, *argv, ",".join(HEAVY)],
        env=env, cwd=tempfile.gettempdir(), check=True, capture_output=True, text=True,
    )  # fmt: skip
    row = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(row["package"]).is_relative_to(tree):  # an installed genodiff won instead
        raise SystemExit(f"the probe imported {row['package']}, not the tree {tree}")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--before", help="a git revision to compare with")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--num-samples", type=int, default=1)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        checkpoint = args.checkpoint or demo_checkpoint(Path(scratch) / "run")
        trees = {"this checkout": ROOT}
        if args.before:
            trees[f"before ({args.before})"] = tree_of(args.before, Path(scratch) / "before")
        runs = {name: [] for name in trees}
        for _ in range(args.repeats):  # interleaved: a slow spell hits every tree
            for name, tree in trees.items():
                runs[name].append(probe(tree, checkpoint, args))
    stages = ("import", "load", "generate", "score")
    print("| tree | " + " | ".join(f"{s} (s)" for s in stages) + " | total | modules | heavy |")
    print("|---" * (len(stages) + 4) + "|")
    for name, rows in runs.items():
        best = {s: min(r[s] for r in rows) for s in stages}
        total = min(sum(r[s] for s in stages) for r in rows)
        cells = " | ".join(f"{best[s]:.2f}" for s in stages)
        heavy = ", ".join(rows[0]["heavy"]) or "none"
        print(f"| {name} | {cells} | {total:.2f} | {rows[0]['modules']} | {heavy} |")


if __name__ == "__main__":
    main()
