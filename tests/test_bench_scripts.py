"""Every script in bench/ answers ``--help`` with its usage and exit status 0, and does no work
on the way (nothing is written where it runs)."""

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "bench").glob("*.py"))


def ask_for_help(script: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, str(script), "--help"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_bench_script_answers_help(tmp_path):
    assert len(SCRIPTS) >= 10  # the glob found the folder
    folders = [tmp_path / script.stem for script in SCRIPTS]
    for folder in folders:
        folder.mkdir()
    # Each start-up imports torch: run them side by side, one per core.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        answers = list(pool.map(ask_for_help, SCRIPTS, folders))
    failures = [
        f"{script.name}: exit {answer.returncode}\n{answer.stdout[-500:]}{answer.stderr[-1500:]}"
        for script, answer in zip(SCRIPTS, answers, strict=True)
        if answer.returncode != 0 or not answer.stdout.startswith(f"usage: {script.name} ")
    ]
    assert not failures, "\n\n".join(failures)
    wrote = {folder.name: sorted(p.name for p in folder.iterdir()) for folder in folders}
    assert not any(wrote.values()), wrote


def test_hg38_table_gpu_full_size_rows_compose_the_configs_own_models(tmp_path):
    # bench/hg38_table.py --trainer gpu --full-size: the configs' models (sizes read here from
    # the model YAML files), one optimizer step per batch, loader workers; CPU rows shrink them
    import argparse
    import importlib.util

    import yaml

    from genodiff.config import load_config

    spec = importlib.util.spec_from_file_location("hg38_table", ROOT / "bench" / "hg38_table.py")
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    fasta = str(ROOT / "data" / "chr22_20-21Mb.fa.gz")
    settings = dict(fasta=fasta, batch_size=8, steps=40, lr=2e-3, trainer="gpu")
    gpu = table.common_overrides(argparse.Namespace(**settings), tmp_path)
    cpu = table.common_overrides(argparse.Namespace(**{**settings, "trainer": "cpu"}), tmp_path)
    for row, model_file in (("mdlm", "caduceus_ph"), ("ar_mamba", "mamba")):
        config_name, shrink = table.ROWS[row]
        config_file = ROOT / "configs" / f"{config_name}.yaml"
        expected = yaml.safe_load((ROOT / "configs" / "model" / f"{model_file}.yaml").read_text())
        full = load_config(config_file, gpu)
        assert full.model.d_model == expected["d_model"] and full.model.n_layer == 4
        assert full.trainer.accumulate_grad_batches == 1 and full.data.num_workers == 4
        assert full.trainer.max_steps == 40 and full.data.batch_size == 8
        small = load_config(config_file, [*cpu, *shrink])
        assert small.model.d_model < expected["d_model"] and small.trainer.accelerator == "cpu"
