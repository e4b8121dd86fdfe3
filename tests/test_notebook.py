"""notebooks/generate_dna.ipynb: stored without outputs, and executed top to bottom on a tiny
checkpoint trained here, by the command the README and the notebook give (``jupyter
nbconvert --execute`` from the repository root, a checkpoint path relative to it)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from Bio import SeqIO

from genodiff import cli
from genodiff.metrics import REPORT_FILES
from tests.test_cli import DEMO, TINY

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "generate_dna.ipynb"


def test_notebook_is_stored_without_outputs():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    args = ["train", DEMO, *TINY, "samples.num_samples=0", "evaluate_test=false"]
    assert cli.main([*args, f"output_dir={out}"]) == 0
    return out / "checkpoints" / "last.ckpt"


def test_notebook_runs_top_to_bottom_as_the_readme_says(checkpoint, tmp_path):
    # A repository-shaped folder: the notebook under notebooks/, the checkpoint under run/.
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "run").mkdir()
    shutil.copy(checkpoint, root / "run" / "last.ckpt")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    (parameters,) = [
        i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", [])
    ]
    # Smaller settings for CI, injected after the parameters cell (as papermill does).
    smaller = nbformat.v4.new_code_cell("NUM_SAMPLES, LENGTH = 8, 64\nSTEPS = LENGTH")
    notebook.cells.insert(parameters + 1, smaller)
    nbformat.write(notebook, root / "notebooks" / "generate_dna.ipynb")

    # jupyter nbconvert --to notebook --execute notebooks/generate_dna.ipynb
    #     --output-dir outputs/notebook, from the root, with a relative GENODIFF_CHECKPOINT
    command = [sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute"]
    command += ["notebooks/generate_dna.ipynb", "--output-dir", "outputs/notebook"]
    env = {**os.environ, "GENODIFF_CHECKPOINT": "run/last.ckpt"}
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]

    out = root / "outputs" / "notebook"
    assert sorted(p.name for p in out.iterdir()) == [
        "generate_dna.ipynb",
        "sample_quality",
        "synthetic_dna.fa",
    ]
    assert sorted(p.name for p in (root / "notebooks").iterdir()) == ["generate_dna.ipynb"]
    executed = nbformat.read(out / "generate_dna.ipynb", as_version=4)
    outputs = [o for cell in executed.cells if cell.cell_type == "code" for o in cell.outputs]
    text = "".join(o.get("text", "") for o in outputs)
    assert f"wrote 8 sequences of 64 bp to {out / 'synthetic_dna.fa'}" in text
    records = list(SeqIO.parse(out / "synthetic_dna.fa", "fasta"))
    assert len(records) == 8 and all(len(r.seq) == 64 for r in records)
    # the environment variable was used, resolved against the folder the command ran from
    description = records[0].description
    assert f"checkpoint={root / 'run' / 'last.ckpt'} " in description
    assert "sampler=cached steps=64 " in description  # the default: one step per position

    report = out / "sample_quality"
    assert sorted(p.name for p in report.iterdir()) == sorted(REPORT_FILES)
    metrics = json.loads((report / "metrics.json").read_text())
    assert list(metrics["kmer_js"]) == ["1", "2", "3", "4", "5", "6"]
    assert 0.0 <= metrics["discriminator_auroc"] <= 1.0
    assert metrics["samples"]["sequences"] == 8 and metrics["reference"]["mean_length"] == 64
    assert metrics["memorisation"]["flagged"] == 0  # a 4-step model copies nothing
    shown = [o for o in outputs if o.output_type == "display_data"]
    assert sum("image/png" in o.data for o in shown) == 2  # the two plots
    assert any("discriminator AUROC" in o.data.get("text/markdown", "") for o in shown)
