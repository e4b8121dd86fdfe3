"""Every script in bench/ answers ``--help`` with its usage and exit status 0, and does no work
on the way (nothing is written where it runs); the scripts run as ``python SCRIPT --help``
would, several in one interpreter (one per core), which imports torch once."""

import gzip
import hashlib
import json
import math
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "bench").glob("*.py"))


# Runs each script given (its path, then the folder to run it in) as ``python SCRIPT --help``
# would, one after the other in this one interpreter (torch is imported once, not once per
# script); writes [exit status, stdout, stderr] per script as JSON to the last argument.
HELP_EACH = """
import contextlib, io, json, os, runpy, sys, traceback

*pairs, report = sys.argv[1:]
answers = []
for script, folder in zip(pairs[::2], pairs[1::2]):
    os.chdir(folder)
    sys.argv = [script, "--help"]
    sys.path.insert(0, os.path.dirname(script))
    out, err, status = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as done:
            status = done.code if isinstance(done.code, int) else int(done.code is not None)
        except BaseException:
            traceback.print_exc()
            status = 1
    sys.path.pop(0)
    answers.append([status, out.getvalue(), err.getvalue()])
with open(report, "w") as file:
    json.dump(answers, file)
"""


def ask_for_help(scripts: list[Path], folders: list[Path], report: Path) -> list[list]:
    """[exit status, stdout, stderr] of ``python SCRIPT --help`` for each of ``scripts``, run
    in its folder of ``folders``, all in one fresh interpreter."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    pairs = [str(path) for pair in zip(scripts, folders, strict=True) for path in pair]
    command = [sys.executable, "-c", HELP_EACH, *pairs, str(report)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(report.read_text())


def test_every_bench_script_answers_help(tmp_path):
    assert len(SCRIPTS) >= 10  # the glob found the folder
    folders = [tmp_path / script.stem for script in SCRIPTS]
    for folder in folders:
        folder.mkdir()
    # Each interpreter imports torch once: one interpreter per core, the scripts dealt out.
    cores = min(os.cpu_count() or 1, len(SCRIPTS))
    deals = [(SCRIPTS[i::cores], folders[i::cores], tmp_path / f"{i}.json") for i in range(cores)]
    with ThreadPoolExecutor(max_workers=cores) as pool:
        dealt = list(pool.map(lambda deal: ask_for_help(*deal), deals))
    answers = {
        script: answer
        for (scripts, _, _), deal_answers in zip(deals, dealt, strict=True)
        for script, answer in zip(scripts, deal_answers, strict=True)
    }
    failures = [
        f"{script.name}: exit {status}\n{stdout[-500:]}{stderr[-1500:]}"
        for script, (status, stdout, stderr) in answers.items()
        if status != 0 or not stdout.startswith(f"usage: {script.name} ")
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


def load_bench_script(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def gpu_session(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "bench"), str(ROOT)])}
    command = [sys.executable, str(ROOT / "bench" / "gpu_session.py"), "run", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def tar_member(archive: Path, name: str, dest: Path) -> Path:
    import tarfile

    with tarfile.open(archive) as tar:
        tar.extract(name, dest, filter="data")
    return dest / name


def test_gpu_session_smoke_trains_ships_and_later_sessions_resume_or_ship(tmp_path):
    # bench/gpu_session.py run --smoke: the whole GPU session on the CPU (the chr22 slice
    # standing in for chrX); its $OUT within the run tool's limits (8 files, 16 MiB each);
    # then a second session goes on from the first one's run tar to a larger token target.
    from genodiff.checkpoints.io import read_checkpoint_file

    out1, out2 = tmp_path / "out1", tmp_path / "out2"
    first = gpu_session(
        "--job", "mdlm-chrx", "--smoke", "--tokens", str(2 * 4 * 1024), "--batch-size", "4",
        "--out", str(out1), "--work", str(tmp_path / "work1"),
    )  # fmt: skip
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    names = {"session.json", "session.log", "mdlm-chrx-run.tar", "mdlm-chrx-model.tar"}
    assert {p.name for p in out1.iterdir()} == names
    assert all(p.stat().st_size < 16 * 2**20 for p in out1.iterdir())
    record = json.loads((out1 / "session.json").read_text())
    assert record["target_steps"] == 2 and record["global_step"] == 2 and record["target_reached"]
    assert set(record["steps_seconds"]) == {"data", "train", "pack run", "ship"}
    run_tar = out1 / "mdlm-chrx-run.tar"
    checkpoint = tar_member(run_tar, "run/checkpoints/last.ckpt", tmp_path / "x1")
    stored = read_checkpoint_file(checkpoint)
    assert stored["global_step"] == 2
    timer = stored["callbacks"]["Timer"]["time_elapsed"]["train"]  # Lightning's max_time timer
    card = tar_member(out1 / "mdlm-chrx-model.tar", "mdlm-chrx/README.md", tmp_path / "x1")
    text = card.read_text()
    assert text.startswith("---\nsummary: MDLM, Caduceus-Ph d118 x 4") and "| chr22 |" in text
    assert "| training steps | 2 |" in text and "ckpt_path" not in text
    # the export names its data by no path of the session's machine: chrX.fa.gz (here the chr22
    # slice as BGZF), by the sha256 of its content and where to get it
    exported = tar_member(out1 / "mdlm-chrx-model.tar", "mdlm-chrx/genodiff.json", tmp_path / "x1")
    shipped = json.loads(exported.read_text())
    assert '"/' not in json.dumps(shipped) and shipped["config"]["data"]["fasta"] == "chrX.fa.gz"
    content = hashlib.sha256(gzip.decompress((ROOT / "data" / "chr22_20-21Mb.fa.gz").read_bytes()))
    (chrx,) = shipped["data_files"]
    assert chrx["content_sha256"] == content.hexdigest() and chrx["path"] is None
    assert "smalt-examples" in chrx["source"] and f"`{content.hexdigest()}`" in text

    second = gpu_session(
        "--job", "mdlm-chrx", "--smoke", "--tokens", str(4 * 4 * 1024), "--batch-size", "4",
        "--resume-from", str(run_tar), "--no-ship",
        "--out", str(out2), "--work", str(tmp_path / "work2"),
    )  # fmt: skip
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "Restored all states from the checkpoint" in second.stdout
    assert {p.name for p in out2.iterdir()} == {"session.json", "session.log", "mdlm-chrx-run.tar"}
    resumed = json.loads((out2 / "session.json").read_text())
    assert resumed["timer_before"] == timer and resumed["trainer_max_time"] > timer
    assert resumed["train_command"][-1] == "ckpt_path=last" and resumed["global_step"] == 4
    history = tar_member(out2 / "mdlm-chrx-run.tar", "run/gpu_sessions.json", tmp_path / "x2")
    assert [h["global_step"] for h in json.loads(history.read_text())] == [2, 4]
    last = tar_member(out2 / "mdlm-chrx-run.tar", "run/checkpoints/last.ckpt", tmp_path / "x2")
    assert read_checkpoint_file(last)["global_step"] == 4

    # a run trained in full whose export failed ships in a later session without training
    out3 = tmp_path / "out3"
    third = gpu_session(
        "--job", "mdlm-chrx", "--smoke", "--tokens", str(2 * 4 * 1024), "--batch-size", "4",
        "--resume-from", str(run_tar), "--out", str(out3), "--work", str(tmp_path / "work3"),
    )  # fmt: skip
    assert third.returncode == 0, third.stdout[-3000:] + third.stderr[-3000:]
    shipped_again = json.loads((out3 / "session.json").read_text())
    assert "train" not in shipped_again["steps_seconds"] and shipped_again["target_reached"]
    assert "the run reached step 2 of 2: no training" in (out3 / "session.log").read_text()
    card = tar_member(out3 / "mdlm-chrx-model.tar", "mdlm-chrx/README.md", tmp_path / "x3")
    assert "| training steps | 2 |" in card.read_text() and "ckpt_path" not in card.read_text()


def test_gpu_session_max_time_stops_training_before_the_export_reserve():
    session = load_bench_script("gpu_session")
    startup = session.STARTUP_SECONDS
    # 500 s left, 100 kept for the export, 1,000.5 s trained in earlier sessions
    assert session.max_time_seconds(500, 100, 1000.5) == math.floor(1000.5 + 400 - startup)
    with pytest.raises(SystemExit, match="left to train"):
        session.max_time_seconds(100 + startup + 5, 100, 0.0)


def test_gpu_session_carries_chrx_as_xz_and_checks_it_before_writing_bgzf(tmp_path):
    import gzip
    import hashlib
    import lzma

    session = load_bench_script("gpu_session")
    fasta = b">X test\n" + b"ACGTTGCA" * 2000 + b"\nNNNN\n"
    source = tmp_path / "chrX.fa.gz"
    source.write_bytes(gzip.compress(fasta))
    carry = tmp_path / "carry"
    carry.mkdir()
    session.recompress_chrx(source, carry)
    assert lzma.decompress((carry / "chrX.fa.xz").read_bytes()) == fasta
    record = json.loads((carry / "chrX.json").read_text())
    assert record["fasta_sha256"] == hashlib.sha256(fasta).hexdigest()
    assert record["fasta_bytes"] == len(fasta)

    log = session.Session(tmp_path / "out", {})
    work = tmp_path / "work"
    work.mkdir()
    bgzf = session.training_fasta(carry / "chrX.fa.xz", work, log)
    assert gzip.decompress(bgzf.read_bytes()) == fasta and bgzf.read_bytes()[12:14] == b"BC"
    assert (work / "chrX.fa").read_bytes() == fasta  # kept: its sha256 goes on the card
    record["fasta_sha256"] = "0" * 64  # a carried file that is not the one prepared
    (carry / "chrX.json").write_text(json.dumps(record))
    with pytest.raises(SystemExit, match="is not the FASTA"):
        session.training_fasta(carry / "chrX.fa.xz", tmp_path / "out", log)


def test_gpu_session_refuses_a_wheel_that_does_not_match_its_sha256sums(tmp_path):
    import hashlib

    session = load_bench_script("gpu_session")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    good, bad = wheels / "a-1-py3-none-any.whl", wheels / "b-1-py3-none-any.whl"
    good.write_bytes(b"a wheel")
    bad.write_bytes(b"another wheel")
    sums = f"{hashlib.sha256(b'a wheel').hexdigest()}  {good.name}\n"
    (wheels / "SHA256SUMS").write_text(sums + f"{'0' * 64}  {bad.name}\n")
    with pytest.raises(SystemExit, match=bad.name):
        session.copy_wheels(wheels, tmp_path / "carry")
    (wheels / "SHA256SUMS").write_text(sums)
    bad.unlink()
    session.copy_wheels(wheels, tmp_path / "carry")
    assert (tmp_path / "carry" / good.name).read_bytes() == b"a wheel"


def test_markov_baseline_matches_counting_by_hand():
    # An add-one order-k chain, counted here with a dict over (context, base) pairs, against
    # the script's vectorised counts; an N breaks every context that spans it.
    import collections
    import random

    markov = load_bench_script("markov_baseline")
    rng = random.Random(0)
    train_text = "".join(rng.choice("ACGT" * 3 + "N") for _ in range(3000))
    test_text = "".join(rng.choice("AACGTT") for _ in range(500))
    for order in (0, 1, 3):
        counts = collections.Counter()
        for i in range(order, len(train_text)):
            if "N" not in train_text[i - order : i + 1]:
                counts[train_text[i - order : i + 1]] += 1
        log_sum, n = 0.0, 0
        for i in range(order, len(test_text)):
            context = test_text[i - order : i]
            row = sum(counts[context + b] + 1 for b in "ACGT")
            log_sum -= math.log((counts[test_text[i - order : i + 1]] + 1) / row)
            n += 1
        expected = math.exp(log_sum / n)
        codes = [markov.base_codes(t) for t in (train_text, test_text)]
        got = markov.markov_perplexity([codes[0]], [codes[1]], order)
        assert got == pytest.approx(expected, rel=1e-9)


def test_ship_model_card_gives_a_conditional_models_bound_with_and_without_its_label():
    # A class-conditional model's test split scored given each window's true label is p(x | y),
    # not comparable with an unconditional model's p(x): the card names it so and adds the
    # null label's bound; a file's windows have no label (the null label in both numbers).
    import dataclasses

    from genodiff.evaluate import evaluate_checkpoint

    ship_model = load_bench_script("ship_model")
    result = evaluate_checkpoint("species-conditional", num_windows=2, seed=0, device="cpu")
    assert result.nelbo != result.nelbo_unconditional

    def rows(name, scored):
        lines = ship_model.heldout_lines(name, scored).splitlines()
        return [[cell.strip() for cell in line.split(" | ")] for line in lines]

    given, null = rows(ship_model.TEST_SPLIT, result)
    assert given[0] == "| the run's test split, p(x \\| y): its true label"
    assert given[4].startswith(f"{result.nelbo:.4f} +- ")
    assert null[0] == "| the run's test split, p(x): the null label"
    assert null[4].startswith(f"{result.nelbo_unconditional:.4f} +- ")
    assert null[5] == f"{math.exp(result.nelbo_unconditional):.4f}"
    (file_row,) = rows("chr22", result)
    assert file_row[0] == "| chr22, p(x): the null label"
    unconditional = dataclasses.replace(result, classes=None)
    (plain,) = rows("chr22", unconditional)
    assert plain[0] == "| chr22" and plain[4].startswith(f"{result.nelbo:.4f} +- ")


def test_the_bench_tables_print_a_dash_for_samples_too_alike_for_an_auroc(monkeypatch):
    # genodiff/metrics/suite.py gives no discriminator AUROC (None) when a side's sequences are
    # near-copies of one another; the card and the tables print "-", not a TypeError.
    js = {"3": 0.01, "6": 0.02}
    metrics = {
        "kmer_js": js,
        "kmer_js_real_vs_real": js,
        "kmer_js_real_vs_real_sd": js,
        "gc_content": {"samples_mean": 0.4, "reference_mean": 0.41},
        "discriminator_auroc": None,
    }
    card = load_bench_script("ship_model").realism_section(metrics, 8, 0, None)
    assert "| discriminator AUROC (0.5: no better than chance at telling them apart) | - |" in card
    quality = {
        "kmer_js": {"1": 0.0, "2": 0.0, "4": 0.0, "6": 0.0},
        "gc_content": {"samples_sd": 0.01, "wasserstein": 0.01},
        "cpg_oe": {"samples_mean": 0.2},
        "low_complexity_fraction": {"samples": 0.0},
        "pairwise_kmer_distance": {"samples": 0.9},
        "memorisation": {"max_identity": None},
        "discriminator": None,
    }
    monkeypatch.syspath_prepend(str(ROOT / "bench"))  # sample_quality imports its neighbours
    assert load_bench_script("sample_quality").row("m", quality, 1.0).endswith("| - | 1 |")
