"""notebooks/generate_dna.ipynb: stored without outputs, and executed top to bottom (nbclient)
on a tiny checkpoint trained here."""

import json
from pathlib import Path

import nbformat
import pytest
from Bio import SeqIO
from nbclient import NotebookClient

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


def test_notebook_runs_top_to_bottom(checkpoint, tmp_path, monkeypatch):
    monkeypatch.setenv("GENODIFF_CHECKPOINT", str(checkpoint))  # read by the first code cell
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    (parameters,) = [
        i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", [])
    ]
    # Smaller settings for CI, injected after the parameters cell (as papermill does).
    smaller = nbformat.v4.new_code_cell("NUM_SAMPLES, LENGTH, STEPS = 8, 64, 8")
    notebook.cells.insert(parameters + 1, smaller)
    client = NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    )
    client.execute()  # raises CellExecutionError, with the cell and traceback, on any error

    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    text = "".join(o.get("text", "") for o in outputs)
    assert "wrote 8 sequences of 64 bp to synthetic_dna.fa" in text
    records = list(SeqIO.parse(tmp_path / "synthetic_dna.fa", "fasta"))
    assert len(records) == 8 and all(len(r.seq) == 64 for r in records)
    assert str(checkpoint) in records[0].description  # the environment variable was used

    report = tmp_path / "sample_quality"
    assert sorted(p.name for p in report.iterdir()) == sorted(REPORT_FILES)
    metrics = json.loads((report / "metrics.json").read_text())
    assert list(metrics["kmer_js"]) == ["1", "2", "3", "4", "5", "6"]
    assert 0.0 <= metrics["discriminator_auroc"] <= 1.0
    assert metrics["samples"]["sequences"] == 8 and metrics["reference"]["mean_length"] == 64
    assert metrics["memorisation"]["flagged"] == 0  # a 4-step model copies nothing
    shown = [o for o in outputs if o.output_type == "display_data"]
    assert sum("image/png" in o.data for o in shown) == 2  # the two plots
    assert any("discriminator AUROC" in o.data.get("text/markdown", "") for o in shown)
