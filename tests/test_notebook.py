"""notebooks/generate_dna.ipynb: stored without outputs, and executed top to bottom on a tiny
checkpoint trained here and, with nothing trained, on the shipped mdlm-chrx, by the command
docs/generating.md and the notebook give (``jupyter nbconvert --execute`` from the repository
root, a checkpoint path relative to it)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from Bio import SeqIO

import genodiff
from genodiff import cli
from genodiff.finetuning.trained import load_finetuned_classifier
from genodiff.metrics import REPORT_FILES
from tests.test_cli import DEMO, TINY
from tests.test_conditioning import ROOT, TINY_RUN

TASK = ROOT / "tests" / "data" / "genomic_benchmarks" / "human_vs_phage"
# A tiny oracle of the bundled task's classes (human, phage): the classes of conditional_demo.
ORACLE_CONFIG = """
name: oracle
output_dir: {out}
folds: 2
keep_checkpoints: true
model: {{name: caduceus, d_model: 16, n_layer: 1, vocab_size: 12, pad_vocab_size_multiple: 8}}
benchmark: {{root: {root}, tasks: [human_vs_phage], download: false}}
sweep: {{lr: [1.0e-2], batch_size: [32]}}
trainer: {{accelerator: cpu, max_epochs: 1, enable_progress_bar: false, num_sanity_val_steps: 0}}
"""

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


@pytest.fixture(scope="module")
def conditional(tmp_path_factory):
    """A tiny class-conditional run of configs/conditional_demo.yaml, a tiny oracle of its
    classes (genodiff finetune on the bundled task) and one reference FASTA per class."""
    out = tmp_path_factory.mktemp("conditional")
    config = str(ROOT / "configs" / "conditional_demo.yaml")
    run = ["train", config, *TINY_RUN, "evaluate_test=false", "samples.num_samples=0"]
    assert cli.main([*run, f"output_dir={out / 'run'}"]) == 0
    oracle_config = out / "oracle.yaml"
    oracle_config.write_text(ORACLE_CONFIG.format(out=out / "oracle", root=TASK.parent))
    genodiff.finetune(str(oracle_config), progress=False)
    (oracle,) = (out / "oracle" / "runs" / "human_vs_phage").glob("*/fold0/checkpoints/best-*.ckpt")
    (out / "reference").mkdir()
    for folder in sorted((TASK / "test").iterdir()):
        records = [f">{f.stem}\n{f.read_text().strip()}\n" for f in sorted(folder.glob("*.txt"))]
        (out / "reference" / f"{folder.name}.fa").write_text("".join(records))
    return {"checkpoint": out / "run" / "checkpoints" / "last.ckpt", "oracle": oracle, "out": out}


def execute(root: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, list]:
    """The notebook, with smaller settings, executed from ``root`` as the README says, with the
    environment variables ``env``; (the process, the executed code cells' outputs)."""
    (root / "notebooks").mkdir(parents=True)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    (parameters,) = [
        i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", [])
    ]
    # Smaller settings for CI, injected after the parameters cell (as papermill does).
    smaller = "NUM_SAMPLES, LENGTH = 8, 64\nSTEPS, CLASS_STEPS = LENGTH, 4"
    notebook.cells.insert(parameters + 1, nbformat.v4.new_code_cell(smaller))
    nbformat.write(notebook, root / "notebooks" / "generate_dna.ipynb")

    # jupyter nbconvert --to notebook --execute notebooks/generate_dna.ipynb
    #     --output-dir outputs/notebook --ExecutePreprocessor.extra_arguments=..., from the
    #     root, with a relative GENODIFF_CHECKPOINT
    command = [sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute"]
    command += ["notebooks/generate_dna.ipynb", "--output-dir", "outputs/notebook"]
    command += ["--ExecutePreprocessor.extra_arguments=--IPKernelApp.log_level=ERROR"]
    env = {**os.environ, **env}
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    executed = nbformat.read(root / "outputs" / "notebook" / "generate_dna.ipynb", as_version=4)
    outputs = [o for cell in executed.cells if cell.cell_type == "code" for o in cell.outputs]
    return done, outputs


def test_notebook_runs_top_to_bottom_as_the_readme_says(checkpoint, conditional, tmp_path):
    # A repository-shaped folder: the notebook under notebooks/, the checkpoint under run/.
    root = tmp_path / "repo"
    (root / "run").mkdir(parents=True)
    shutil.copy(checkpoint, root / "run" / "last.ckpt")
    shutil.copy(conditional["checkpoint"], root / "run" / "conditional.ckpt")
    shutil.copy(conditional["oracle"], root / "run" / "oracle.ckpt")
    shutil.copytree(conditional["out"] / "reference", root / "run" / "reference")
    env = {
        "GENODIFF_CHECKPOINT": "run/last.ckpt",
        "GENODIFF_CONDITIONAL_CHECKPOINT": "run/conditional.ckpt",
        "GENODIFF_ORACLE": "run/oracle.ckpt",
        "GENODIFF_CLASS_REFERENCE": "run/reference",
    }
    done, outputs = execute(root, env)

    out = root / "outputs" / "notebook"
    assert sorted(p.name for p in out.iterdir()) == [
        "generate_dna.ipynb",
        "guided_human.fa",
        "guided_quality",
        "sample_quality",
        "synthetic_dna.fa",
    ]
    assert sorted(p.name for p in (root / "notebooks").iterdir()) == ["generate_dna.ipynb"]
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

    # "Generate DNA of a chosen class": the first class, gamma 2, judged by the oracle
    assert "wrote 8 sequences of class human (gamma 2) to" in text
    guided = list(SeqIO.parse(out / "guided_human.fa", "fasta"))
    assert len(guided) == 8 and all(len(r.seq) == 200 for r in guided)
    assert all(set(str(r.seq)) <= set("ACGT") for r in guided)  # no mask left
    assert "sampler=cached steps=4 " in guided[0].description
    assert "label=human guidance=2 guidance_schedule=constant" in guided[0].description
    assert "skipped" not in text
    assert "IProgress" not in done.stderr + text and "encrypt" not in done.stderr.lower()
    metrics = json.loads((out / "guided_quality" / "metrics.json").read_text())
    oracle = load_finetuned_classifier(conditional["oracle"])  # its calls, made here
    calls = oracle.predict([str(r.seq) for r in guided])
    human = oracle.classes.index("human")
    assert metrics["oracle_accuracy"] == pytest.approx(sum(c == human for c in calls) / 8)
    assert set(metrics["kmer_js"]) == {"human"} and metrics["samples"]["sequences"] == 8


def test_the_shipped_ar_model_in_either_section(tmp_path):
    # GENODIFF_CHECKPOINT=ar-chrx, the AR model that ships: the notebook asked it for the
    # cached sampler with steps and stopped at its refusal (AR has only ancestral, which
    # takes no steps); now it says so and draws with AR's own sampler. As the class model
    # (unconditional) it stopped at a TypeError (model.classes is None); now that section
    # says why it is skipped, as for a missing model.
    env = {"GENODIFF_CHECKPOINT": "ar-chrx", "GENODIFF_CONDITIONAL_CHECKPOINT": "ar-chrx"}
    done, outputs = execute(tmp_path / "repo", env)
    assert [o.get("ename") for o in outputs if o.output_type == "error"] == []
    text = "".join(o.get("text", "") for o in outputs)
    assert "ar-chrx cannot draw with the cached sampler; drawing with ancestral" in text
    out = tmp_path / "repo" / "outputs" / "notebook"
    records = list(SeqIO.parse(out / "synthetic_dna.fa", "fasta"))
    assert len(records) == 8 and all(len(r.seq) == 64 for r in records)
    assert "checkpoint=ar-chrx " in records[0].description
    assert " sampler=ancestral seed=0 " in records[0].description  # no steps: AR takes none
    assert (out / "sample_quality" / "metrics.json").is_file()
    assert "skipped: ar-chrx (CONDITIONAL_CHECKPOINT) is not class-conditional" in text
    assert "skipped: no samples of a class to judge" in text
    assert sorted(p.name for p in out.iterdir()) == [
        "generate_dna.ipynb",
        "sample_quality",
        "synthetic_dna.fa",
    ]


@pytest.mark.parametrize(
    "trained", ["nothing", "a checkpoint that is nowhere", "the class model, no oracle"]
)
def test_a_section_whose_inputs_are_missing_says_so_and_is_skipped(
    checkpoint, conditional, tmp_path, trained
):
    # Before any training the shipped models draw: mdlm-chrx (its chrX data is not on this
    # machine: the samples are judged against the shipped chr22 slice, no copy check) and
    # species-conditional (its data ships: its guided samples are judged against its own test
    # windows of the class; no oracle). Checkpoints that are no path, name or Hub id skip every
    # section. After the quick start and step 1 of the walkthrough (its class model), the
    # quick start's model draws and its class model's own test windows judge its samples. The
    # class section reads no variable of the sections before it: after the quick start alone
    # it is the class section of "nothing" (checked there), its first sections those here.
    root = tmp_path / "repo"
    (root / "run").mkdir(parents=True)
    env = {}
    if trained == "a checkpoint that is nowhere":
        env["GENODIFF_CHECKPOINT"] = env["GENODIFF_CONDITIONAL_CHECKPOINT"] = "no-such-model"
    elif trained != "nothing":
        shutil.copy(checkpoint, root / "run" / "last.ckpt")
        env["GENODIFF_CHECKPOINT"] = "run/last.ckpt"
    if trained == "the class model, no oracle":
        shutil.copy(conditional["checkpoint"], root / "run" / "conditional.ckpt")
        env["GENODIFF_CONDITIONAL_CHECKPOINT"] = "run/conditional.ckpt"
    done, outputs = execute(root, env)
    text = "".join(o.get("text", "") for o in outputs)
    assert [o.get("ename") for o in outputs if o.output_type == "error"] == []
    out = root / "outputs" / "notebook"
    written = sorted(p.name for p in out.iterdir())
    held_out = ROOT / "data" / "chr22_20-21Mb.fa.gz"
    fallback = f"reference: {held_out} (human chr22:20-21 Mb, which genodiff ships), since the "
    fallback += "model's test data is not on this machine"
    no_copy_check = "copy check skipped: the data the model was trained on is not on this machine"
    if trained == "a checkpoint that is nowhere":
        missing = root / "no-such-model"
        assert f"skipped: no-such-model (CHECKPOINT) is no checkpoint at {missing}" in text
        assert "no named model (`genodiff models` lists them) and no Hub id" in text
        assert "skipped: no samples to judge" in text
    else:
        assert f"wrote 8 sequences of 64 bp to {out / 'synthetic_dna.fa'}" in text
        assert "skipped: no checkpoint" not in text
        metrics = json.loads((out / "sample_quality" / "metrics.json").read_text())
        assert metrics["samples"]["sequences"] == 8 and metrics["reference"]["mean_length"] == 64
    if trained == "nothing":  # the shipped model, judged against chr22, no copy check
        records = list(SeqIO.parse(out / "synthetic_dna.fa", "fasta"))
        assert len(records) == 8 and all(set(str(r.seq)) <= set("ACGT") for r in records)
        assert "checkpoint=mdlm-chrx " in records[0].description
        assert "sampler=cached steps=64 " in records[0].description
        assert fallback in text
        assert f"{no_copy_check}; set TRAIN to a FASTA of it to look for copies" in text
        assert metrics["reference"]["file"] == str(held_out)
        assert metrics["reference"]["records"] == 1  # the one record of the chr22 slice
        assert "memorisation" not in metrics
    elif trained != "a checkpoint that is nowhere":  # the demo's data ships: its own splits
        assert fallback not in text and no_copy_check not in text
        assert "file" not in metrics["reference"] and metrics["reference"]["records"] > 1
        assert metrics["memorisation"]["flagged"] == 0
    if trained == "a checkpoint that is nowhere":
        missing = root / "no-such-model"
        assert (
            f"skipped: no-such-model (CONDITIONAL_CHECKPOINT) is no checkpoint at {missing}" in text
        )
        assert "skipped: no samples of a class to judge" in text
    else:  # the first class at gamma 2, against that class's test windows of the model's data
        assert "wrote 8 sequences of class human (gamma 2)" in text
        assert "no oracle's verdict: it needs an oracle (ORACLE: nothing matches" in text
        # the oracle of the model's own config: conditional_X -> oracle_X
        shipped = trained != "the class model, no oracle"
        oracle = "oracle_species" if shipped else "oracle_demo"
        assert f"nothing matches outputs/{oracle}/runs/*/*/fold0/checkpoints/best-*.ckpt" in text
        assert (
            f"--dest outputs/{oracle}_data` and `genodiff finetune configs/{oracle}.yaml`" in text
        )
        guided = list(SeqIO.parse(out / "guided_human.fa", "fasta"))
        assert len(guided) == 8 and all(len(r.seq) == (256 if shipped else 200) for r in guided)
        assert ("checkpoint=species-conditional " in guided[0].description) == shipped
        quality = json.loads((out / "guided_quality" / "metrics.json").read_text())
        # species-conditional's human test windows: 390 (its card); the demo's: its test files
        human_test = 390 if shipped else len(list((TASK / "test" / "human").glob("*.txt")))
        assert quality["reference"]["records"] == human_test
        assert quality["samples"]["sequences"] == 8 and "oracle_accuracy" not in quality
    drawn = ["guided_human.fa", "guided_quality", "sample_quality", "synthetic_dna.fa"]
    expected = [] if trained == "a checkpoint that is nowhere" else drawn
    assert written == ["generate_dna.ipynb", *expected]
