"""Examples of the documentation, run from its text as a reader copies them (at smaller sizes,
through options appended last or exact substitutions): the guided-generation walkthrough of
docs/guidance.md, every command of it, the sampling variants of docs/generating.md, whose files
exist, README.md's models by name, and every Python example of docs/python_api.md and
README.md."""

from __future__ import annotations

import json
import math
import shlex
import shutil
from pathlib import Path

from Bio import SeqIO

import genodiff
from tests import doc_commands
from tests.test_conditioning import TINY_RUN
from tests.test_hub import write_hub_cache
from tests.test_sample_cli import checkpoint  # noqa: F401 (a module-scoped fixture)

ROOT = Path(__file__).resolve().parents[1]

CLASSIFIER_SIZE = [  # a guidance classifier at test size
    "model.d_model=16",
    "model.n_layer=1",
    "trainer.max_steps=2",
    "trainer.val_check_interval=2",
    "trainer.limit_val_batches=1",
]
WALKTHROUGH = {  # smaller sizes for each command of the walkthrough
    "train": [o for o in TINY_RUN if not o.startswith("samples.")]
    + ["samples.num_samples=0", "evaluate_test=false"],
    "sample": ["--num-samples", "8", "--steps", "4"],
    "data": [],
    "finetune": ["model.d_model=16", "model.n_layer=1", "folds=2", "trainer.max_epochs=1"],
    "evaluate-samples": ["--folds", "2"],
}
VARIANTS = {  # and for the variants of its step 2
    "sample": ["--num-samples", "2", "--steps", "4"],
    "classifier": CLASSIFIER_SIZE,
}


def test_the_guided_walkthrough_runs_as_printed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # its outputs/ and files land here; configs/ are found anyway
    block = doc_commands.code_block(ROOT / "docs" / "guidance.md", "# guided-walkthrough")
    lines = doc_commands.commands(block)
    # One path: the model, its samples, an oracle of data it never saw, the verdict.
    assert [line.split()[1] if line.startswith("genodiff") else line[:7] for line in lines] == [
        "train", "sample", "data", "finetune", "ORACLE=", "evaluate-samples"
    ]  # fmt: skip
    assert "--steps" in lines[1] and "--sampler cached" in lines[1]  # minutes, not an hour
    variables = doc_commands.run(lines, lambda words: WALKTHROUGH[words[1]])

    samples = list(SeqIO.parse("phage.fa", "fasta"))
    assert len(samples) == 8 and all(len(r.seq) == 200 for r in samples)
    assert "label=phage guidance=2 guidance_schedule=constant" in samples[0].description
    assert "sampler=cached steps=4 " in samples[0].description
    assert "/fold0/checkpoints/best-epoch" in variables["ORACLE"]
    report = json.loads(Path("phage_report/metrics.json").read_text())
    assert report["oracle"]["task"] == "conditional_demo"
    assert report["oracle"]["classes"] == ["human", "phage"]
    assert report["samples"]["per_class"]["phage"]["sequences"] == 8
    assert 0 <= report["oracle_accuracy"] <= 1
    assert set(report["discriminator_auroc"]) == set(report["gc_content"]) == {"phage"}
    # The printed sample count is one the reference supports: evaluate-samples warns below two
    # reference windows per sample (the windows do not depend on the count, only the length).
    printed = shlex.split(lines[1])
    documented = int(printed[printed.index("--num-samples") + 1])
    phage = report["per_class"]["phage"]
    assert phage["reference"]["sequences"] >= 2 * documented
    assert not [w for w in phage["warnings"] if "reference windows" in w]  # nor at 8 here
    shown = capsys.readouterr().out  # the report, as evaluate-samples prints it
    assert "| phage | 8 |" in shown and "discriminator AUROC | GC (real) | CpG o/e (real)" in shown

    # The variants of step 2, on the same generator: each file's headers say how it was guided.
    variants = doc_commands.code_block(ROOT / "docs" / "guidance.md", "# guided-variants")
    doc_commands.run(doc_commands.commands(variants), lambda words: VARIANTS[words[1]])
    ramp, cbg, transition = (
        next(SeqIO.parse(f"phage_{name}.fa", "fasta")).description for name in ("ramp", "cbg", "t")
    )
    assert "guidance=3 guidance_schedule=ramp" in ramp
    assert "classifier=outputs/classifier_demo/checkpoints/last.ckpt" in cbg
    assert "classifier_form=first-order" in cbg and "guidance_form=transition" in transition


def test_the_sampling_variants_run_as_printed(checkpoint, tmp_path, monkeypatch):  # noqa: F811
    # A repository-shaped folder: the quick start's checkpoint, and the repository's data/.
    (tmp_path / "outputs" / "demo" / "checkpoints").mkdir(parents=True)
    shutil.copy(checkpoint, tmp_path / "outputs" / "demo" / "checkpoints" / "last.ckpt")
    (tmp_path / "data").symlink_to(ROOT / "data")
    monkeypatch.chdir(tmp_path)
    block = doc_commands.code_block(ROOT / "docs" / "generating.md", "# sampling-variants")
    lines = doc_commands.commands(block)
    assert len(lines) == 5 and lines[-1].endswith(
        "--infill data/templates/infill_demo.fa --sampler cached"
    )

    def smaller(words: list[str]) -> list[str]:
        sizes = ["--num-samples", "1"]
        if "first-hitting" not in words:  # it takes no steps
            sizes += ["--steps", "4"]
        if "semi-ar" in words:
            return [*sizes, "--length", "48", "--block", "32", "--stride", "16"]
        return sizes if "--infill" in words else [*sizes, "--length", "32"]

    doc_commands.run(lines, smaller)
    for out in ("cached.fa", "first_hitting.fa", "long.fa", "prefixed.fa"):
        (sample,) = SeqIO.parse(out, "fasta")  # each variant wrote its own file
    assert len(sample.seq) == 32 and str(sample.seq).startswith("TATAAAAGGC")
    (drawn,) = SeqIO.parse("infilled.fa", "fasta")  # the last line's: the template's gaps filled
    template = "".join(Path("data/templates/infill_demo.fa").read_text().splitlines()[1:])
    assert len(drawn.seq) == len(template) == 200 and "N" not in drawn.seq
    assert str(drawn.seq)[:60] == template[:60] and str(drawn.seq)[140:] == template[140:]
    assert template[60:140] == "N" * 80


def listed(options: list[str]) -> str:
    """Options as the items of a Python list in an example's text."""
    return ", ".join(f'"{option}"' for option in options)


# A run of the demo's recipe at test size, for the examples' overrides.
TINY_DEMO = listed([*TINY_RUN, "data.max_length=128", "evaluate_test=false"])
PYTHON_API = {  # docs/python_api.md, made smaller: its sizes, its runs' lengths
    "length=1024, steps=128": "length=64, steps=4",
    "steps=128, seed=1": "steps=4, seed=1",
    "steps=200": "steps=4",
    'length=256, prefix="TATAAAAGGC", sampler="cached", steps=256': (
        'length=64, prefix="TATAAAAGGC", sampler="cached", steps=4'
    ),
    "100_000, 1024, steps=1024": "3, 64, steps=4",
    '["trainer.max_steps=20"]': f'["trainer.max_steps=20", {TINY_DEMO}]',
    '["folds=3"]': f'["folds=3", {listed(WALKTHROUGH["finetune"])}]',  # folds=2 last wins
    '"generator=outputs/conditional_demo"': (
        f'"generator=outputs/conditional_demo", {listed(CLASSIFIER_SIZE)}'
    ),
    # The page loads an export folder before its "Save and reload" writes one; the test made
    # it first, for the loading example, so the save replaces it.
    'save_pretrained("exported/demo")': 'save_pretrained("exported/demo", overwrite=True)',
}
README = {"steps=64": "steps=4", "steps=128": "steps=4"}  # README.md's Python examples


def test_the_python_examples_run_as_printed(checkpoint, tmp_path, monkeypatch):  # noqa: F811
    """A folder with what docs/python_api.md loads before it makes it: the demo's run, an
    export of it, the same export as the Hub id the page names (a cache, offline), and the
    class-conditional demo's run its classifier example guides."""
    demo = Path(checkpoint).parents[1]
    shutil.copytree(demo, tmp_path / "outputs" / "demo")
    monkeypatch.chdir(tmp_path)
    genodiff.load("outputs/demo").save_pretrained("exported/demo")
    (tmp_path / "hf-cache").mkdir()
    revisions = {"main": Path("exported/demo"), "v1": Path("exported/demo")}
    write_hub_cache(tmp_path / "hf-cache", "you/my-model", revisions)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    conditional = [*TINY_RUN, "samples.num_samples=0", "evaluate_test=false"]
    genodiff.train("conditional_demo", conditional, output_dir="outputs/conditional_demo")

    blocks = doc_commands.python_blocks(ROOT / "docs" / "python_api.md")
    session = doc_commands.run_python(blocks, PYTHON_API, "docs/python_api.md")
    assert len(blocks) == 9  # every block but the signature: none left out unnoticed
    assert len(session["samples"]) == 8 and len(session["nelbo"]) == 8
    assert len(session["guided"]) == 16 and str(session["primed"][0]).startswith("TATAAAAGGC")
    assert len(list(SeqIO.parse("large.fa", "fasta"))) == 3  # written, then found complete
    assert session["run_dir"] == (tmp_path / "outputs" / "try").resolve()
    assert "| human_vs_phage |" in session["results"].table
    assert session["classifier_ckpt"].name == "last.ckpt"
    assert {"metrics.json", "metrics.md"} <= {f.name for f in Path("outputs/quality").iterdir()}

    (tmp_path / "readme").mkdir()  # a reader's other session: the README writes samples.fa too
    monkeypatch.chdir(tmp_path / "readme")
    readme = doc_commands.python_blocks(ROOT / "README.md")
    session = doc_commands.run_python(readme, README, "README.md")
    assert len(readme) == 2 and len(session["s_aureus"]) == 8
    saved = list(SeqIO.parse("samples.fa", "fasta"))  # "From Python": the shipped model's draws
    assert [str(r.seq) for r in saved] == list(session["samples"])
    assert all(len(r.seq) == 256 for r in saved)
    assert "checkpoint=mdlm-chrx " in saved[0].description
    nelbo = session["nelbo"]
    assert len(nelbo) == 4 and all(0 < n < math.log(4) + 0.5 for n in nelbo)  # nats per token


def test_the_named_models_block_runs_as_printed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    lines = doc_commands.commands(doc_commands.code_block(ROOT / "README.md", "# models-by-name"))
    assert [line.split()[1] for line in lines] == ["models", "models", "sample"]
    doc_commands.run(lines[:1], lambda words: [])
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert {"mdlm-chrx", "ar-chrx", "species-conditional"} <= set(listed)  # each name first
    doc_commands.run(lines[1:2], lambda words: [])
    assert "# mdlm-chrx" in capsys.readouterr().out  # its card
    doc_commands.run(lines[2:], lambda words: ["--length", "32", "--steps", "2"])
    assert [len(r.seq) for r in SeqIO.parse("chrx.fa", "fasta")] == [32] * 8
    # Left out, the length and steps are the ones the text below the block names.
    chrx = genodiff.load("mdlm-chrx")
    assert chrx.generation_config.steps == chrx.config["data"]["max_length"] == 1024
