"""Fine-tuning results as CSV (every run), JSON (everything), Markdown (the paper table), PNG.

Summary per task over the folds of the selected sweep point: mean top-1 test accuracy and the
range (max - min) over folds, written ``mean ± range`` as in the Caduceus / MDLM papers.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np

from genodiff.atomic_files import atomic_write, save_figure, write_text

# Caduceus-MDLM top-1 accuracy from the MDLM paper (docs/architecture.md §9).
PUBLISHED_CADUCEUS_MDLM = {
    "dummy_mouse_enhancers_ensembl": 0.795,
    "demo_coding_vs_intergenomic_seqs": 0.913,
    "demo_human_or_worm": 0.970,
    "human_enhancers_cohn": 0.743,
    "human_enhancers_ensembl": 0.899,
    "human_ensembl_regulatory": 0.868,
    "human_ocr_ensembl": 0.823,
    "human_nontata_promoters": 0.940,
}
RESULT_EXTENSIONS = ("csv", "json", "md", "png")
RESULT_FILES = tuple(f"results.{ext}" for ext in RESULT_EXTENSIONS)  # in output_dir
CSV_COLUMNS = (
    "task", "lr", "batch_size", "fold", "seed", "selected", "val_acc", "test_acc", "test_mcc",
    "test_f1", "test_loss", "epochs", "n_train", "n_val", "n_test", "wall_s", "cpu_s", "checkpoint",
)  # fmt: skip


def selected_runs(task: dict[str, Any]) -> list[dict[str, Any]]:
    sel = task["selected"]
    return [r for r in task["runs"] if (r["lr"], r["batch_size"]) == (sel["lr"], sel["batch_size"])]


def summarize(results: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per task: mean / min / max test accuracy, mean MCC and F1 over the selected folds."""
    summary = {}
    for name, task in results.items():
        runs = selected_runs(task)
        acc = np.array([r["test_acc"] for r in runs])
        summary[name] = {
            "folds": len(runs),
            "acc_mean": float(acc.mean()),
            "acc_min": float(acc.min()),
            "acc_max": float(acc.max()),
            "mcc_mean": float(np.mean([r["test_mcc"] for r in runs])),
            "f1_mean": float(np.mean([r["test_f1"] for r in runs])),
            "val_acc_mean": float(np.mean([r["val_acc"] for r in runs])),
        }
    return summary


def markdown_table(results: dict[str, Any], source: str) -> str:
    summary = summarize(results)
    lines = [
        f"Top-1 test accuracy, mean ± (max − min) over folds; model: {source}",
        "",
        "| task | classes | max len | lr | batch | folds | accuracy | MCC | F1 "
        "| Caduceus-MDLM (paper) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, task in results.items():
        s, sel = summary[name], task["selected"]
        paper = PUBLISHED_CADUCEUS_MDLM.get(name)
        lines.append(
            f"| {name} | {len(task['classes'])} | {task['max_length']} | {sel['lr']:g} "
            f"| {sel['batch_size']} | {s['folds']} "
            f"| {s['acc_mean']:.3f} ± {s['acc_max'] - s['acc_min']:.3f} | {s['mcc_mean']:.3f} "
            f"| {s['f1_mean']:.3f} | {'—' if paper is None else f'{paper:.3f}'} |"
        )
    return "\n".join(lines) + "\n"


def write_csv(results: dict[str, Any], path: Path) -> None:
    """Every run of every task, one row each (``CSV_COLUMNS``), atomically."""
    with atomic_write(path, newline="") as f:
        writer = csv.DictWriter(f, CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for task in results.values():
            chosen = selected_runs(task)
            for r in task["runs"]:
                writer.writerow({**r, "selected": r in chosen})


def plot(results: dict[str, Any], path: Path) -> None:
    """Bar per task at the mean test accuracy, error bar from the worst to the best fold, and
    the published Caduceus-MDLM accuracy as a marker where there is one; a PNG written
    atomically. Drawn on a ``Figure`` of its own (no pyplot, so no backend or global state)."""
    from matplotlib.figure import Figure

    summary = summarize(results)
    names = list(results)
    mean = np.array([summary[n]["acc_mean"] for n in names])
    low = mean - np.array([summary[n]["acc_min"] for n in names])
    high = np.array([summary[n]["acc_max"] for n in names]) - mean
    x = np.arange(len(names))
    fig = Figure(figsize=(max(4.0, 1.2 * len(names) + 1.5), 4.0), layout="tight")
    ax = fig.subplots()
    ax.bar(
        x,
        mean,
        yerr=[low, high],
        capsize=4,
        color="tab:blue",
        label="genodiff: mean, min-max over folds",
    )
    paper = [(i, PUBLISHED_CADUCEUS_MDLM[n]) for i, n in enumerate(names)
             if n in PUBLISHED_CADUCEUS_MDLM]  # fmt: skip
    if paper:
        px, py = zip(*paper, strict=True)
        ax.scatter(px, py, marker="D", color="tab:red", zorder=3, label="Caduceus-MDLM (paper)")
    ax.set_xticks(x, names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("top-1 test accuracy")
    ax.set_ylim(0, 1)
    ax.legend(loc="lower right", fontsize=8)
    save_figure(fig, path)


def write_results(results: dict[str, Any], output_dir: Path, source: str) -> dict[str, Path]:
    """results.csv, results.json, results.md and results.png in ``output_dir``, each written
    atomically (a reader sees the previous file or the new one)."""
    paths = {ext: output_dir / f"results.{ext}" for ext in RESULT_EXTENSIONS}
    write_csv(results, paths["csv"])
    payload = {"model": source, "summary": summarize(results), "tasks": results}
    write_text(paths["json"], json.dumps(payload, indent=2))
    write_text(paths["md"], markdown_table(results, source))
    plot(results, paths["png"])
    return paths
