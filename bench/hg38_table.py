"""The MDLM paper's hg38 table at small scale: every row trained and scored the same way.

Each row is one of the ``configs/hg38*.yaml`` experiments, shrunk to ~82 K parameters (equal
counts across rows) and trained for the same token budget on real human DNA
(human chrX of GRCh37, first 70 Mb: the SMALT aligner's public test genome ``hs37chrXtrunc``;
first 78% train, next 2% validation, last 20% test), then scored
by ``genodiff eval`` on the same test windows. Rows run one at a time (``--rows mdlm``) so they
can be started as soon as each is wanted; results accumulate in ``<out>/results.json`` and the
table is printed from everything there. The FASTA must be BGZF (pyfaidx random access):

    apt-get download smalt-examples && dpkg -x smalt-examples_*_all.deb smalt
    python -c "from genodiff.data.genome import bgzip_fasta; \
bgzip_fasta('smalt/usr/share/doc/smalt/test/data/hs37chrXtrunc.fa.gz', 'chrX.fa.gz')"
    python bench/hg38_table.py --fasta chrX.fa.gz --rows mdlm sedd plaid ar_mamba ar_hyena

On a GPU, ``--trainer gpu --full-size`` trains the configs' own models (the paper's
Caduceus-Ph d118 x 4, Mamba d128 x 4, ...) in bf16 with 4 loader workers instead of the
~82 K-parameter CPU models:

    python bench/hg38_table.py --fasta chrX.fa.gz --rows mdlm ar_mamba markov \
        --trainer gpu --full-size --batch-size 128 --steps 1200 --lr 2e-3

UDLM (``--rows udlm``, not in the paper's table) needs a time-conditioned backbone, whose sigma
embedding adds 8,320 parameters to the d64 Caduceus (90,944 in all).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from genodiff.checkpoints import load_model

ROOT = Path(__file__).resolve().parents[1]
GENODIFF = [sys.executable, "-m", "genodiff.cli"]  # the installed CLI of this interpreter

# config, model overrides giving ~82 K parameters (Caduceus d64 x 2 = 82,624;
# Mamba d72 x 2 = 82,296; HyenaDNA d48 x 2 = 82,336).
ROWS = {
    "ar_mamba": ("hg38_ar_mamba", ["model.d_model=72", "model.n_layer=2"]),
    "ar_hyena": ("hg38_ar_hyena", ["model.d_model=48", "model.d_inner=192", "model.n_layer=2"]),
    "mdlm": ("hg38", ["model=caduceus_tiny"]),
    "sedd": ("hg38_sedd", ["model=caduceus_tiny"]),
    # time-conditioned: + the sigma embedding (2 d^2 + 2 d = 8,320 at d64), 90,944 in all
    "udlm": ("hg38_udlm", ["model=caduceus_tiny", "model.time_conditioning=true"]),
    "plaid": ("hg38_plaid", ["model=caduceus_tiny"]),
    "d3pm": ("hg38_d3pm", ["model=caduceus_tiny"]),
}
PAPER = {"ar_mamba": 3.067, "ar_hyena": 3.153, "plaid": 3.240, "sedd": 3.216, "mdlm": 3.199}


def common_overrides(args: argparse.Namespace, out: Path) -> list[str]:
    """Every row's overrides: the FASTA's windows and splits, then ``recipe_overrides``."""
    return [
        "data=demo",
        f"data.fasta={args.fasta}",
        "data.split_fractions=[0.78,0.02,0.2]",
        "data.max_length=1024",
        *recipe_overrides(args, out),
    ]


def recipe_overrides(args: argparse.Namespace, out: Path) -> list[str]:
    """The training recipe of every row, whatever its data: trainer, batch, steps, validation,
    learning rate, EMA; no test score or samples (``genodiff eval`` scores afterwards)."""
    trainer = ["trainer=cpu"]
    if args.trainer == "gpu":  # bf16-mixed; one optimizer step per batch; loader workers
        trainer = ["trainer=gpu", "trainer.accumulate_grad_batches=1", "data.num_workers=4"]
    return [
        f"data.batch_size={args.batch_size}",
        *trainer,
        f"trainer.max_steps={args.steps}",
        f"trainer.val_check_interval={max(args.steps // 4, 1)}",
        "trainer.limit_val_batches=8",
        "trainer.enable_progress_bar=false",
        f"optim.lr={args.lr}",
        "ema.decay=0.999",
        "ema.warmup=true",
        "evaluate_test=false",
        "samples.num_samples=0",
        f"output_dir={out}",
    ]


def run(command: list[str], log: Path) -> str:
    """Run ``command``, tee stderr to ``log``; stdout is returned (``genodiff eval --json``)."""
    with open(log, "a") as err:
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed (exit {result.returncode}); see {log}")
    return result.stdout


def train_and_score(row: str, args: argparse.Namespace, score: bool) -> dict | None:
    config, model_overrides = ROWS[row]
    out = args.out / row
    out.mkdir(parents=True, exist_ok=True)
    log = out / "bench.log"
    timing = out / "train_seconds.txt"  # written when training finished: rerun only scores
    if not timing.exists():
        start = time.perf_counter()
        overrides = common_overrides(args, out)
        if not args.full_size:
            overrides += model_overrides
        run([*GENODIFF, "train", f"configs/{config}.yaml", *overrides], log)
        timing.write_text(f"{time.perf_counter() - start:.0f}\n")
    train_s = float(timing.read_text())
    if not score:
        return None
    best = sorted((out / "checkpoints").glob("best-step*.ckpt"))[-1]
    scored = run(
        [
            *GENODIFF, "eval", "--checkpoint", str(best), "--json",
            "--num-windows", str(args.eval_windows), "--t-samples", str(args.t_samples),
        ],
        log,
    )  # fmt: skip
    result = json.loads(scored)
    result.update(
        row=row, train_seconds=round(train_s), checkpoint=str(best), parameters=parameters(best)
    )
    return result


def parameters(checkpoint: Path) -> int:
    """Trained parameters of a checkpoint: the backbone's plus the objective's own (Plaid)."""
    model = load_model(checkpoint)
    return sum(p.numel() for m in (model.backbone, model.objective) for p in m.parameters())


def markov_reference(args: argparse.Namespace) -> str:
    overrides = common_overrides(args, args.out / "markov")
    command = [sys.executable, "bench/markov_baseline.py", "configs/demo.yaml", *overrides]
    return run([*command, "--orders", *args.markov_orders], args.out / "markov.log")


def table(results: dict[str, dict]) -> str:
    lines = [
        "| row | params | perplexity | +- s.e. | kind | train time | paper (hg38, 1k) |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    order = sorted(results, key=lambda r: results[r]["perplexity"])
    for row in order:
        r = results[row]
        kind = r["likelihood"]
        minutes = f"{r['train_seconds'] / 60:.1f} min"
        paper = PAPER.get(row, float("nan"))
        lines.append(
            f"| {row} | {r['parameters']:,} | {r['perplexity']:.4f} | "
            f"{r['perplexity_se']:.4f} | {kind} | {minutes} | {paper:.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fasta", required=True, help="BGZF FASTA (e.g. chrX, 70 Mb)")
    parser.add_argument("--rows", nargs="*", default=[], choices=[*ROWS, "markov"])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--eval-windows", type=int, default=800)
    parser.add_argument("--t-samples", type=int, default=4)
    parser.add_argument("--trainer", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument(
        "--full-size", action="store_true", help="the configs' own models, not the ~82 K ones"
    )
    parser.add_argument("--markov-orders", nargs="+", default=["2", "4", "6", "8"])
    parser.add_argument("--out", type=Path, default=ROOT / "bench_runs" / "hg38_table")
    parser.add_argument("--train-only", action="store_true", help="train now, score later")
    args = parser.parse_args()
    args.fasta = str(Path(args.fasta).resolve())
    args.out.mkdir(parents=True, exist_ok=True)
    results_file = args.out / "results.json"
    results = json.loads(results_file.read_text()) if results_file.exists() else {}
    for row in args.rows:
        if row == "markov":
            print(markov_reference(args))
            continue
        result = train_and_score(row, args, score=not args.train_only)
        if result is None:
            continue
        results[row] = result
        results_file.write_text(json.dumps(results, indent=2))
        print(f"{row}: perplexity {results[row]['perplexity']:.4f}", flush=True)
    print(table(results))


if __name__ == "__main__":
    main()
