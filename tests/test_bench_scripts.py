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
