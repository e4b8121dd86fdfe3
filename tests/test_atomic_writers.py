"""Every file genodiff writes goes through ``genodiff.atomic_files`` (or a documented staging),
and an interrupted write leaves the previous file whole: the CSV and PNG of fine-tuning, the
sample-quality report, the folder of ``genodiff data labelled-split``.

The first tests read the package's source (and the text plugin's) with ``ast`` and fail on any
call that writes a file outside a ``with atomic_write(...)`` block, so a new writer that
bypasses it is caught."""

from __future__ import annotations

import ast
import csv
import random
import sys
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from genodiff import atomic_files, cli
from genodiff.data import labelled_split
from genodiff.finetuning.results import CSV_COLUMNS, plot, write_csv, write_results

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (ROOT / "genodiff", ROOT / "plugins" / "genodiff-text" / "src")

# (file, function) -> why it may write on its own. "*": the whole file.
ALLOWED = {
    ("genodiff/atomic_files.py", "*"): "atomic_write itself, and the folder swap",
    ("genodiff/checkpoints/folders.py", "_folder_files.write_weights"): "staged by _write_folder",
    ("genodiff/checkpoints/folders.py", "_json_writer"): "staged by _write_folder",
    ("genodiff/checkpoints/folders.py", "_write_folder"): "a folder's files renamed together",
    ("genodiff/data/download.py", "download"): "the resumable .part file, renamed when whole",
    ("genodiff/data/download.py", "_finish"): "the .part file, whole and checked, renamed",
    ("genodiff/checkpoints/run_folder.py", "hold"): "the run's lock file, not an output",
    ("genodiff/config.py", "_experiment_folder"): "a temporary copy of configs Hydra reads",
    ("genodiff/cli.py", "_reader_left"): "/dev/null for standard output once its reader left",
}

# Calls that write whatever object they are called on (Path.write_text, Figure.savefig, ...).
WRITING_METHODS = {"write_text", "write_bytes", "savefig", "to_csv", "to_parquet", "tofile",
                   "save_file", "touch"}  # fmt: skip
# Functions that write a file (or a handle they may be given a path for), by dotted name.
WRITING_FUNCTIONS = {
    "torch.save", "np.save", "np.savez", "np.savez_compressed", "np.savetxt", "numpy.save",
    "OmegaConf.save", "SeqIO.write", "shutil.move", "shutil.copy", "shutil.copy2",
    "shutil.copyfile", "shutil.copytree", "os.replace", "os.rename", "os.renames", "os.link",
    "os.symlink", "os.truncate",
}  # fmt: skip
# Modules whose ``open(path, mode)`` takes the mode second, as the built-in open does.
OPENERS = {"gzip", "bz2", "lzma", "io", "codecs", "os"}
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}


def dotted(node: ast.expr) -> str:
    """``a.b.c`` for a chain of names and attributes; ``?`` stands for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return "?"


def opens_for_writing(call: ast.Call, name: str) -> bool:
    """Whether an ``open`` call opens for writing: its mode (second argument of open,
    os.fdopen, gzip.open..., first of Path.open) holds w, a, x or +, or cannot be read."""
    if name == "os.open":
        flags = call.args[1] if len(call.args) > 1 else None
        return flags is not None and any(
            isinstance(n, ast.Name | ast.Attribute) and dotted(n).split(".")[-1] in WRITE_FLAGS
            for n in ast.walk(flags)
        )
    first = name in ("open", "os.fdopen") or name.split(".")[0] in OPENERS
    position = 1 if first else 0
    mode = next((k.value for k in call.keywords if k.arg == "mode"), None)
    if mode is None and len(call.args) > position:
        mode = call.args[position]
    if mode is None:
        return False
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return bool(set(mode.value) & set("wax+"))
    return True  # a computed mode may write


def writes(call: ast.Call) -> str | None:
    """The dotted name of ``call`` when it writes a file, else None."""
    name = dotted(call.func)
    method = name.split(".")[-1]
    if method in ("open", "fdopen") and opens_for_writing(call, name):
        return name
    if isinstance(call.func, ast.Attribute) and method in WRITING_METHODS:
        return name
    if name in WRITING_FUNCTIONS:
        return name
    # Path.rename(target) / Path.replace(target): one argument (str.replace takes two)
    path_rename = method in ("rename", "replace") and isinstance(call.func, ast.Attribute)
    if path_rename and len(call.args) == 1 and not call.keywords:
        return name
    return None


def unguarded_writes(source: str) -> list[tuple[int, str, str]]:
    """(line, enclosing function, call) of every write in ``source`` outside an atomic_write
    block; the items of a ``with`` after an ``atomic_write(...)`` item count as inside it."""
    found = []

    def walk(node: ast.AST, scope: tuple[str, ...], guarded: bool) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            scope = (*scope, node.name)
        if isinstance(node, ast.With):
            for item in node.items:
                walk(item, scope, guarded)
                call = item.context_expr
                opens = isinstance(call, ast.Call) and dotted(call.func).endswith("atomic_write")
                guarded = guarded or opens
            for statement in node.body:
                walk(statement, scope, guarded)
            return
        if isinstance(node, ast.Call) and not guarded and (name := writes(node)) is not None:
            found.append((node.lineno, ".".join(scope), name))
        for child in ast.iter_child_nodes(node):
            walk(child, scope, guarded)

    walk(ast.parse(source), (), False)
    return found


def test_the_checker_flags_writes_outside_atomic_write_and_nothing_else():
    source = """
def outside(path, fig, cfg, data):
    open(path, "w")
    open(path, mode="ab")
    path.open("w", newline="")
    gzip.open(path, "wt")
    os.fdopen(fd, "r+b" if again else "wb")
    os.open(path, os.O_WRONLY | os.O_CREAT)
    path.write_text("x")
    fig.savefig(path, dpi=120)
    OmegaConf.save(cfg, path)
    torch.save(data, path)
    os.replace(path, path)
    path.rename(other)

def readers(path, text):
    open(path)
    open(path, "rb")
    path.open()
    gzip.open(path, "rt")
    os.open(path, os.O_RDONLY)
    text.replace("a", "b")
    dataclasses.replace(cfg, name="x")

def inside(path, fig, data):
    with atomic_write(path, "wb") as handle, os.fdopen(os.dup(handle.fileno()), "wb") as dup:
        fig.savefig(handle, format="png")
        torch.save(data, dup)
    with opener(path, "rb") as source:
        pass
    open(path, "x")
"""
    found = unguarded_writes(source)
    assert [line for line, _, _ in found] == [*range(3, 15), 31]
    assert found[0] == (3, "outside", "open") and found[-1] == (31, "inside", "open")
    assert {name for _, _, name in found[:12]} >= {"path.write_text", "fig.savefig", "os.open"}


def test_no_file_is_written_outside_atomic_write_or_a_documented_staging():
    found = []
    for top in SOURCES:
        for path in sorted(top.rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            for line, scope, name in unguarded_writes(path.read_text()):
                if (where, "*") not in ALLOWED and (where, scope) not in ALLOWED:
                    found.append(f"{where}:{line} {name} in {scope or '(module)'}")
    assert found == [], "write these with genodiff.atomic_files.atomic_write:\n" + "\n".join(found)


def test_every_allowed_writer_still_exists_and_writes():
    """An allow-list entry that matches no write anymore would hide the next one."""
    for (where, scope), _ in ALLOWED.items():
        found = unguarded_writes((ROOT / where).read_text())
        assert any(scope in ("*", s) for _, s, _ in found), (where, scope)


# ----------------------------------------------------------------------------- CSV and PNG


def run(fold: int, acc: float) -> dict:
    return {
        **{column: 0 for column in CSV_COLUMNS},
        **{"lr": 1e-3, "batch_size": 8, "fold": fold, "test_acc": acc, "val_acc": acc},
        **{"test_mcc": 0.5, "test_f1": 0.5, "checkpoint": f"fold{fold}.ckpt"},
    }


RESULTS = {
    "task_a": {
        "classes": ["x", "y"],
        "max_length": 10,
        "selected": {"lr": 1e-3, "batch_size": 8},
        "runs": [run(0, 0.75), run(1, 0.25)],
    }
}


def left_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_the_csv_has_every_run_and_an_interrupted_write_keeps_the_old_one(tmp_path, monkeypatch):
    path = tmp_path / "results.csv"
    write_csv(RESULTS, path)
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["fold"], r["test_acc"], r["selected"]) for r in rows] == [
        ("0", "0.75", "True"),
        ("1", "0.25", "True"),
    ]
    before = path.read_bytes()
    written = []

    def fail_on_the_second_row(self, row):
        if written:
            raise RuntimeError("killed mid-write")
        written.append(row)
        return original(self, row)

    original = csv.DictWriter.writerow
    monkeypatch.setattr(csv.DictWriter, "writerow", fail_on_the_second_row)
    changed = {"task_a": {**RESULTS["task_a"], "runs": [run(0, 0.5), run(1, 0.5)]}}
    with pytest.raises(RuntimeError, match="killed mid-write"):
        write_csv(changed, path)
    assert written and path.read_bytes() == before
    assert left_in(tmp_path) == ["results.csv"]


def half_a_png(figure: Figure, handle, **kwargs) -> None:
    """savefig that writes part of a PNG, then fails."""
    handle.write(b"\x89PNG\r\n\x1a\n partial")
    raise OSError("killed mid-write")


def test_an_interrupted_plot_keeps_the_old_png(tmp_path, monkeypatch):
    path = tmp_path / "results.png"
    plot(RESULTS, path)
    before = path.read_bytes()
    assert before.startswith(b"\x89PNG\r\n\x1a\n") and len(before) > 1000
    monkeypatch.setattr(Figure, "savefig", half_a_png)
    with pytest.raises(OSError, match="killed mid-write"):
        write_results(RESULTS, tmp_path, "model")
    assert path.read_bytes() == before
    # the files before the plot were written whole; nothing temporary is left
    assert left_in(tmp_path) == ["results.csv", "results.json", "results.md", "results.png"]


def test_an_interrupted_report_keeps_the_old_plots(tmp_path, monkeypatch):
    from genodiff.domains import DNADomain
    from genodiff.metrics import evaluate_samples, write_report
    from tests.test_metrics import random_dna

    quality = evaluate_samples(
        random_dna(6, 40, seed=1), random_dna(20, 40, seed=2), DNADomain.alphabet
    )
    paths = write_report(quality, tmp_path)
    before = {p.name: p.read_bytes() for p in paths}
    assert all(before[name].startswith(b"\x89PNG") for name in before if name.endswith(".png"))
    monkeypatch.setattr(Figure, "savefig", half_a_png)
    with pytest.raises(OSError, match="killed mid-write"):
        write_report(quality, tmp_path)
    assert {p.name: p.read_bytes() for p in paths} == before
    assert left_in(tmp_path) == sorted(before)


# ----------------------------------------------------------------------------- labelled-split


@pytest.fixture
def split_config(tmp_path) -> Path:
    from tests.test_oracle import AT_RICH, GC_RICH, SPLIT_CONFIG, random_dna, write_fasta

    rng = random.Random(3)
    for name, weights in (("at", AT_RICH), ("gc", GC_RICH)):
        write_fasta(tmp_path / f"{name}.fa", {f"{name}{i}": random_dna(rng, weights, 200)
                                                for i in (1, 2)})  # fmt: skip
    config = tmp_path / "tiny_species.yaml"
    config.write_text(SPLIT_CONFIG.format(at=tmp_path / "at.fa", gc=tmp_path / "gc.fa"))
    return config


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*")
            if p.is_file()}  # fmt: skip


def test_reference_fastas_are_biopython_fasta_of_every_window(split_config, tmp_path):
    from Bio import SeqIO

    dest = tmp_path / "split"
    assert cli.main(["data", "labelled-split", str(split_config), "--dest", str(dest)]) == 0
    manifest = (dest / "manifest.json").read_text()
    for name in ("at", "gc"):
        records = list(SeqIO.parse(dest / "reference" / f"{name}.fa", "fasta"))
        files = sorted((dest / "tiny_species").glob(f"*/{name}/*.txt"), key=lambda p: p.name)
        assert [str(r.seq) for r in records] == [p.read_text().strip() for p in files]
        assert all(r.id.startswith(f"{name}|") and r.description == r.id for r in records)
        assert all(f'"{r.id}"' in manifest for r in records)


@pytest.mark.parametrize("failing_write", [1, 9, 17])  # the first .txt, one more, the manifest
def test_an_interrupted_overwrite_keeps_the_previous_split(
    split_config, tmp_path, monkeypatch, failing_write
):
    dest = tmp_path / "split"
    args = ["data", "labelled-split", str(split_config), "--dest", str(dest)]
    assert cli.main(args) == 0
    before, siblings = snapshot(dest), left_in(tmp_path)
    calls = []
    write_text = labelled_split.write_text

    def failing(path, text):
        calls.append(path)
        if len(calls) == failing_write:
            raise RuntimeError("killed mid-write")
        write_text(path, text)

    monkeypatch.setattr(labelled_split, "write_text", failing)
    with pytest.raises(RuntimeError, match="killed mid-write"):
        cli.main([*args, "--overwrite", "--task", "again"])
    assert len(calls) == failing_write
    assert (calls[-1].name == "manifest.json") == (failing_write == 17)
    assert snapshot(dest) == before
    assert left_in(tmp_path) == siblings  # no staging folder left beside it
    monkeypatch.undo()
    assert cli.main([*args, "--overwrite", "--task", "again"]) == 0
    assert sorted(p.name for p in dest.iterdir()) == ["again", "manifest.json", "reference"]
    assert left_in(tmp_path) == siblings


# ----------------------------------------------------------------------------- replace_folder


def folder(path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    return path


@pytest.mark.parametrize("dest_state", ["missing", "empty", "full", "full, two renames"])
def test_replace_folder_puts_the_new_folder_in_place_and_removes_the_old(
    tmp_path, monkeypatch, dest_state
):
    staging = folder(tmp_path / ".dest.1.tmp", {"new.txt": "new", "sub/deep.txt": "deep"})
    dest = tmp_path / "dest"
    if dest_state != "missing":
        dest.mkdir()
    if dest_state.startswith("full"):
        folder(dest, {"old.txt": "old", "sub/old.txt": "old"})
    renames = []
    real = atomic_files.os.replace
    monkeypatch.setattr(atomic_files.os, "replace", lambda *a: renames.append(a) or real(*a))
    if dest_state == "full, two renames":
        monkeypatch.setattr(atomic_files, "exchange", lambda first, second: False)
    atomic_files.replace_folder(staging, dest)
    assert snapshot(dest) == {"new.txt": b"new", "sub/deep.txt": b"deep"}
    assert left_in(tmp_path) == ["dest"]
    expected = {"missing": 1, "empty": 1, "full": 0, "full, two renames": 2}[dest_state]
    assert len(renames) == expected  # the swap on Linux is renameat2, not os.replace


def test_a_failed_second_rename_puts_the_old_folder_back(tmp_path, monkeypatch):
    staging = folder(tmp_path / ".dest.1.tmp", {"new.txt": "new"})
    dest = folder(tmp_path / "dest", {"old.txt": "old"})
    monkeypatch.setattr(atomic_files, "exchange", lambda first, second: False)
    real = atomic_files.os.replace

    def second_fails(source, target):
        if Path(source) == staging:
            raise OSError("killed between the renames")
        real(source, target)

    monkeypatch.setattr(atomic_files.os, "replace", second_fails)
    with pytest.raises(OSError, match="between the renames"):
        atomic_files.replace_folder(staging, dest)
    assert snapshot(dest) == {"old.txt": b"old"}
    assert left_in(tmp_path) == [".dest.1.tmp", "dest"]  # the caller removes its staging


@pytest.mark.skipif(sys.platform != "linux", reason="renameat2 is a Linux call")
def test_exchange_swaps_two_folders_in_one_call(tmp_path):
    first = folder(tmp_path / "first", {"a.txt": "a"})
    second = folder(tmp_path / "second", {"b.txt": "b"})
    assert atomic_files.exchange(first, second)
    assert snapshot(first) == {"b.txt": b"b"} and snapshot(second) == {"a.txt": b"a"}
    with pytest.raises(FileNotFoundError):
        atomic_files.exchange(first, tmp_path / "missing")
