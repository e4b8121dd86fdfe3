"""Sampling at scale (issue 29): sequence i of a run is a function of (seed, i) and the request
alone, so a run gives the same sequences under any batch size, streamed to its file batch by
batch, resumed after a kill, or drawn by several processes.

The models are small networks with random weights (sampling needs no training): what is
checked is that the draws of a sequence never depend on the others.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from genodiff import cli
from genodiff.classifiers.guide import ClassifierGuide
from genodiff.errors import InputFileExistsError, InputValueError
from genodiff.model import GenerativeModel
from genodiff.pipeline import Model
from genodiff.randomness.noise import Noise, sequence_seed
from genodiff.sample_files import read_samples
from tests.checkpoint_files import save_as_trained
from tests.test_classifiers import TOK, classifier
from tests.test_cli import ROOT

CADUCEUS = {"name": "caduceus", "d_model": 16, "n_layer": 1}
LENGTH = 24


def model(
    objective: str = "mdlm", backbone: dict | None = None, objective_options=None, **config
) -> Model:
    torch.manual_seed(0)
    section = {
        "model": backbone or CADUCEUS,
        "objective": {"name": objective, **(objective_options or {})},
        "data": {"name": "fasta", "max_length": LENGTH},
        "ema": {"decay": 0},
        **config,
    }
    return Model(GenerativeModel(section), "in memory")


MAMBA = {"name": "mamba", "d_model": 16, "n_layer": 1}
TIMED = {**CADUCEUS, "time_conditioning": True}
LABELS = {"labels": ["a", "b"]}
MODELS = {
    "mdlm": lambda: model(),
    "mdlm-timed": lambda: model(backbone=TIMED),
    "d3pm": lambda: model("d3pm"),
    "sedd": lambda: model("sedd"),
    "sedd-conditional": lambda: model("sedd", conditioning=LABELS),
    "udlm": lambda: model("udlm", TIMED),
    "plaid": lambda: model("plaid", objective_options={"d_model": 16}),
    "ar": lambda: model("ar", MAMBA),
    "ar-hyena": lambda: model("ar", {**MAMBA, "name": "hyena"}),
    "ar-conditional": lambda: model("ar", MAMBA, conditioning=LABELS),
    "conditional": lambda: model(conditioning=LABELS),
    "udlm-conditional": lambda: model("udlm", TIMED, conditioning=LABELS),
}
# an infill template of LENGTH bp: upper case kept, lower case and N drawn
TEMPLATE = "ACGTnnnnnnACGTNNNNNNACGT"
# (model, generate's options): every sampler, guidance in every form and kind (D-CFG, D-CBG,
# FUDGE), a prefix, an infill template (TEMPLATE, written in the test); "classifier" names a
# kind (``built``)
CASES = [
    ("mdlm", {"sampler": "ancestral", "steps": 6}),
    ("mdlm", {"sampler": "cached", "steps": 6}),
    ("mdlm", {"sampler": "first-hitting"}),
    ("mdlm", {"sampler": "semi-ar", "block": 12, "stride": 6, "steps": 4}),
    ("mdlm", {"sampler": "cached", "steps": 6, "prefix": "ACGTAC", "top_p": 0.9}),
    ("d3pm", {"steps": 6}),
    ("sedd", {"sampler": "analytic", "steps": 6}),
    ("sedd", {"sampler": "euler", "steps": 6}),
    ("udlm", {"steps": 6}),
    ("plaid", {"steps": 4}),
    ("ar", {"temperature": 0.8}),
    ("conditional", {"label": "b", "guidance": 2.0, "steps": 6}),
    ("conditional", {"label": "a", "guidance": 3.0, "guidance_schedule": "ramp", "steps": 6}),
    ("conditional", {"sampler": "first-hitting", "label": "b", "guidance": 2.0,
                     "guidance_form": "transition"}),
    ("mdlm", {"sampler": "first-hitting", "infill": True, "temperature": 0.8}),
    ("mdlm", {"sampler": "cached", "steps": 6, "label": "b", "guidance": 2.0,
              "classifier": "noisy"}),
    # D-CBG, exact, past a step after which a batch's changed rows are all revealed (a
    # classifier call on no position)
    ("mdlm", {"sampler": "cached", "steps": 48, "label": "a", "guidance": 2.0,
              "classifier": "noisy", "classifier_form": "exact"}),
    ("mdlm-timed", {"sampler": "semi-ar", "block": 12, "stride": 6, "steps": 4}),
    ("sedd-conditional", {"steps": 6, "label": "a", "guidance": 2.5, "infill": True}),
    ("udlm", {"steps": 6, "label": "b", "guidance": 2.0, "classifier": "noisy"}),
    ("ar-hyena", {"prefix": "ACGTAC", "top_p": 0.9}),
    ("ar-conditional", {"label": "b", "guidance": 2.0, "guidance_schedule": "ramp"}),
    ("ar", {"infill": True, "label": "a", "guidance": 2.0, "classifier": "causal"}),
    # D3PM's other samplers, constraints and reshaping on the other objectives
    ("d3pm", {"sampler": "cached", "steps": 6, "temperature": 0.7}),
    ("d3pm", {"sampler": "first-hitting", "top_p": 0.8}),
    ("d3pm", {"sampler": "semi-ar", "block": 12, "stride": 4, "steps": 3, "prefix": "ACG"}),
    ("sedd", {"sampler": "euler", "steps": 6, "prefix": "ACGTAC", "temperature": 0.6,
              "top_p": 0.7}),
    ("udlm-conditional", {"steps": 6, "label": "b", "guidance": 3.0,
                          "guidance_schedule": "ramp", "infill": True}),
    ("plaid", {"steps": 4, "prefix": "ACGTAC", "temperature": 0.7, "top_p": 0.9}),
    # D-CBG in the x0 form: the classifier tilts the revealed position of the running rows
    ("mdlm", {"sampler": "first-hitting", "label": "b", "guidance": 2.0, "classifier": "noisy",
              "guidance_form": "x0"}),
    ("ar-conditional", {"label": "a", "guidance": 2.0, "top_p": 0.9}),
]  # fmt: skip
# (model, generate's options) drawn with the weights in bfloat16
BF16_CASES = [
    ("mdlm", {"sampler": "cached", "steps": 6}),
    ("mdlm", {"sampler": "first-hitting", "temperature": 0.8}),
    ("conditional", {"label": "b", "guidance": 2.0, "steps": 6}),
    ("sedd", {"steps": 6}),
    ("udlm", {"steps": 6}),
    ("plaid", {"steps": 4}),
    ("ar", {"top_p": 0.9}),
]


def built(options: dict, folder: Path | None = None) -> dict:
    """A copy of ``options`` as ``generate`` takes them: the classifier they name ("noisy" or
    "causal") built, and for ``infill`` the template (TEMPLATE) written into ``folder``."""
    options = dict(options)
    if "classifier" in options:
        backbone = "mamba" if options["classifier"] == "causal" else "caduceus"
        network = classifier(options["classifier"], backbone, classes=2)
        options["classifier"] = ClassifierGuide(network, TOK, ["a", "b"])
    if "infill" in options:
        assert folder is not None, "an infill case writes its template: give a folder"
        options["infill"] = folder / "template.fa"
        options["infill"].write_text(f">template\n{TEMPLATE}\n")
    return options


@pytest.mark.parametrize(
    ("name", "options"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)]
)
def test_a_sequence_is_the_same_under_any_batch_size(name, options, tmp_path):
    net, options = MODELS[name](), built(options, tmp_path)
    runs = [net.generate(5, LENGTH, seed=7, batch_size=size, **options) for size in (1, 2, 5)]
    assert runs[0] == runs[1] == runs[2]
    # and sequence i alone, as the first of a run of one, is the run's i-th: a function of
    # (seed, i) through its own stream, whatever came before it
    alone = net.network.eval_objective.sample(
        net.network.eval_backbone,
        net._plan(1, LENGTH, {"seed": 7, **options}).request,
        Noise.per_sequence(7, [3], "cpu"),
    )
    assert net.tokenizer.decode_sample(alone[0].tolist()) == runs[0][3]
    assert len(set(runs[0])) > 1  # the sequences differ from each other


@pytest.mark.parametrize(
    ("name", "options"), BF16_CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(BF16_CASES)]
)
def test_a_sequence_is_the_same_under_any_batch_size_in_bfloat16(name, options):
    net = MODELS[name]().to(dtype=torch.bfloat16)
    runs = [net.generate(5, LENGTH, seed=7, batch_size=size, **options) for size in (1, 2, 5)]
    assert runs[0] == runs[1] == runs[2]
    assert runs[0].run.dtype == "bfloat16"  # drawn with the cast weights
    assert len(set(runs[0])) > 1


def test_each_sequence_has_its_own_stream():
    seeds = [sequence_seed(5, i) for i in range(100)] + [sequence_seed(6, 0)]
    assert len(set(seeds)) == len(seeds)
    one = Noise.per_sequence(5, [0, 1, 2], "cpu").uniform(3, 4)  # (3, 4)
    picked = Noise.per_sequence(5, [2, 0], "cpu").uniform(2, 4)
    torch.testing.assert_close(picked, one[[2, 0]], rtol=0, atol=0)
    parts = Noise.per_sequence(5, [0], "cpu")
    assert not torch.equal(parts.branch(0).uniform(1, 4), parts.branch(1).uniform(1, 4))


def test_the_samples_record_how_they_were_drawn():
    written = model().generate(2, LENGTH, steps=4, seed=1)
    assert written.run.draws == "per-sequence-v1"
    assert "seed=1 draws=per-sequence-v1" in written.run.describe()


# ------------------------------------------------------------------ streaming and resuming


def test_the_streamed_file_is_the_in_memory_one(tmp_path):
    net = model()
    samples = net.generate(7, LENGTH, steps=4, seed=2, batch_size=3)
    streamed = net.generate_to_file(tmp_path / "s.fa", 7, LENGTH, steps=4, seed=2, batch_size=3)
    assert streamed.path.read_bytes() == samples.save(tmp_path / "m.fa").read_bytes()
    assert streamed.count == 7 and streamed.length == LENGTH
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.fa", "s.fa"]  # nothing staged left


def test_an_existing_output_or_a_killed_runs_work_is_refused_before_drawing(tmp_path):
    net = model()
    out = tmp_path / "s.fa"
    out.write_text(">kept\nACGT\n")
    with pytest.raises(InputFileExistsError, match="exists") as caught:
        net.generate_to_file(out, 2, LENGTH, steps=4)
    assert caught.value.parameter == ("out", "overwrite")
    assert out.read_text() == ">kept\nACGT\n"
    net.generate_to_file(out, 2, LENGTH, steps=4, overwrite=True)
    assert out.read_text().count(">") == 2
    staged = tmp_path / ".t.fa.partial"
    staged.write_text(">sample_0_seed0 x\nACGT\n")
    with pytest.raises(InputFileExistsError, match="did not finish") as caught:
        net.generate_to_file(tmp_path / "t.fa", 2, LENGTH, steps=4)
    assert caught.value.parameter == "resume"
    assert staged.read_text() == ">sample_0_seed0 x\nACGT\n"


@pytest.mark.parametrize("rows", [slice(2, 4), slice(None, None, -1), slice(1, None, 2)])
def test_a_slice_of_samples_saves_each_sample_under_its_index_in_the_run(tmp_path, rows):
    # samples[2:4].save wrote them as sample_0 and sample_1 of the seed, which that seed draws
    # otherwise; a negative step was torch's ValueError ("step must be greater than zero").
    net = model()
    samples = net.generate(5, LENGTH, steps=2, seed=4)
    part = samples[rows]
    assert list(part) == list(samples)[rows]
    out = part.save(tmp_path / "part.fa")
    names = [line.split()[0] for line in out.read_text().splitlines() if line.startswith(">")]
    assert names == [f">sample_{i}_seed4" for i in range(5)[rows]]
    redrawn = {f">sample_{i}_seed4": text for i, text in enumerate(samples)}
    assert [redrawn[name] for name in names] == read_samples(out)
    assert list(part[::-1]) == list(samples)[rows][::-1]  # a slice of a slice


@pytest.mark.parametrize("name", ["samples", "a_folder"])
def test_an_output_without_a_format_is_refused_as_the_command_refuses_it(tmp_path, name):
    # A name without a suffix (or a folder) was a pathlib ValueError ("Invalid pattern")
    # from the look for other processes' shares, before the output's own check.
    (tmp_path / "a_folder").mkdir()
    with pytest.raises(InputValueError, match="unknown output format|is a folder") as caught:
        model().generate_to_file(tmp_path / name, 2, LENGTH, steps=2)
    assert caught.value.parameter == "out"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_folder"]


@pytest.fixture
def drawn(monkeypatch) -> list[int]:
    """The indices of the sequences ``Model.generate_to_file`` draws in the test, in order."""
    indices: list[int] = []
    real_draw = Model._draw

    def counting(self, job, todo, progress):
        indices.extend(todo)
        return real_draw(self, job, todo, progress)

    monkeypatch.setattr(Model, "_draw", counting)
    return indices


def test_a_run_interrupted_between_batches_resumes_to_the_same_file(tmp_path, monkeypatch, drawn):
    """A failure after two batches leaves the staged file and its record; the same call with
    resume (in batches of another size) draws only the rest and ends with the uninterrupted
    run's bytes."""
    net = model()
    options = {"steps": 4, "seed": 4, "batch_size": 2}
    whole = net.generate_to_file(tmp_path / "whole.fa", 7, LENGTH, **options).path
    from genodiff import sample_files

    real_write, writes = sample_files.SampleStream.write, []

    def write_twice(self, start, ids):
        if len(writes) == 2:
            raise KeyboardInterrupt  # a kill between batches
        writes.append(start)
        real_write(self, start, ids)

    monkeypatch.setattr(sample_files.SampleStream, "write", write_twice)
    out = tmp_path / "split.fa"
    with pytest.raises(KeyboardInterrupt):
        net.generate_to_file(out, 7, LENGTH, **options)
    monkeypatch.setattr(sample_files.SampleStream, "write", real_write)
    assert not out.exists()
    record = json.loads((tmp_path / ".split.fa.partial.json").read_text())
    assert record["items"] == 4
    # other settings: refused, naming the one that changed
    with pytest.raises(InputValueError, match=r"another job \(run\.seed: '4' then, '5' now\)"):
        net.generate_to_file(out, 7, LENGTH, resume=True, **{**options, "seed": 5})
    # another length: the file would mix sequences of two lengths
    with pytest.raises(InputValueError, match=rf"another job \(length: {LENGTH} then, 12 now\)"):
        net.generate_to_file(out, 7, 12, resume=True, **options)
    drawn.clear()  # another batch size is the same job: it changes no sequence
    net.generate_to_file(out, 7, LENGTH, resume=True, **{**options, "batch_size": 3})
    assert drawn == [4, 5, 6]  # only the sequences not written yet
    assert out.read_bytes() == whole.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["split.fa", "whole.fa"]


def test_resume_with_nothing_staged_takes_only_this_runs_finished_file(tmp_path, drawn):
    """With nothing staged, resume finds an existing file finished when it holds this run's
    samples, named and described as the run names them: nothing is drawn. Anything else (a
    user's file, another run's samples, fewer or more of them) is refused and left as it is."""
    net = model()
    options = {"steps": 4, "seed": 3, "batch_size": 2}
    for suffix in (".fa", ".jsonl", ".txt"):
        out = net.generate_to_file(tmp_path / f"s{suffix}", 3, LENGTH, **options).path
        finished = out.read_bytes()
        drawn.clear()
        again = net.generate_to_file(out, 3, LENGTH, resume=True, **options)
        assert again.finished_before and drawn == [] and out.read_bytes() == finished
        others = [(3, {**options, "seed": 4}), (2, options), (4, options)]
        if suffix == ".txt":  # a line per sample: no names, no provenance
            others = others[1:]
        for count, changed in others:
            with pytest.raises(InputFileExistsError, match="not this command's finished file"):
                net.generate_to_file(out, count, LENGTH, resume=True, **changed)
            assert drawn == [] and out.read_bytes() == finished
    users = tmp_path / "mine.fa"
    users.write_text("precious\n")
    with pytest.raises(InputFileExistsError, match="nothing is staged to resume") as caught:
        net.generate_to_file(users, 1, LENGTH, resume=True, **options)
    assert caught.value.parameter == ("out", "overwrite")
    assert users.read_text() == "precious\n" and drawn == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.fa", "s.fa", "s.jsonl", "s.txt"]


def test_a_finished_share_of_a_run_is_taken_as_its_samples_alone(tmp_path):
    """A process's part file (samples 3 and 4 of 6) counts as finished on resume when it holds
    those two, named as the run names them; as another share, or as the whole run, it does not."""
    from genodiff.sample_files import SampleStream

    net = model()
    job = net._plan(6, LENGTH, {"steps": 2, "seed": 1})
    part = tmp_path / ".s.part1of2.fa"

    def stream(block, resume=True):
        return SampleStream(part, job.run, net.tokenizer, 6, LENGTH, (), resume, False, {}, block)

    first = stream(range(3, 5), resume=False)
    first.write(3, torch.full((2, LENGTH), net.tokenizer.encode("A")[0]))
    first.finish()
    assert part.read_text().startswith(">sample_3_seed1 ")
    again = stream(range(3, 5))
    assert again.complete and again.done == 2
    again.finish()
    for other in (range(1, 3), None):
        with pytest.raises(InputFileExistsError, match="not this command's finished file"):
            stream(other)


def as_process(rank: int, patch: pytest.MonkeyPatch) -> None:
    """``generate_to_file`` run as process ``rank`` of a ``--devices 2`` run would run it (the
    processes stood in for: ``launch_workers`` gives this process's place, with no group)."""
    from genodiff import pipeline
    from genodiff.parallel import Workers

    patch.setattr(pipeline, "launch_workers", lambda settings: Workers(rank, 2))
    patch.setattr(pipeline, "is_main_process", lambda: rank == 0)


def stop_a_two_process_run_after_a_batch(
    net: Model, out: Path, options: dict, ranks=(0, 1)
) -> None:
    """What a ``--devices 2`` run of 6 samples stopped after the first batch of the processes
    ``ranks`` leaves beside ``out``: each one's share staged as that process stages it (each
    share drawn here in turn, ``as_process``)."""
    from genodiff import sample_files

    real_write = sample_files.SampleStream.write

    def stop_after_a_batch(self, start, ids):
        real_write(self, start, ids)
        raise KeyboardInterrupt

    for rank in ranks:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(sample_files.SampleStream, "write", stop_after_a_batch)
            as_process(rank, patch)
            with pytest.raises(KeyboardInterrupt):
                net.generate_to_file(out, 6, LENGTH, accelerator="cpu", devices=2, **options)


def test_the_progress_of_a_two_process_run_counts_every_process_samples(tmp_path):
    """The main process's line counts the samples of the whole run: its own and those the
    other process has written (here all 3 of its share, before the main one starts its own).
    Was: the main process's sampler steps alone, as if its share were the run."""
    import io

    from genodiff.progress import Progress

    net = model()
    options = {"steps": 2, "seed": 3, "batch_size": 2}
    out = tmp_path / "s.fa"
    with pytest.MonkeyPatch.context() as patch:
        as_process(1, patch)  # samples 3, 4, 5
        net.generate_to_file(out, 6, LENGTH, accelerator="cpu", devices=2, **options)
    lines = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        as_process(0, patch)
        bar = Progress("genodiff sample", stream=lines, interval=0)
        net.generate_to_file(
            out, 6, LENGTH, resume=True, accelerator="cpu", devices=2, progress=bar, **options
        )  # the other share finished, as in a resumed run (or one where it is the faster)
    counts = [line.split(",")[0] for line in lines.getvalue().splitlines()]
    assert counts[0] == "genodiff sample: samples 3/6 (50%)"  # the other share, before any
    assert "genodiff sample: samples 5/6 (83%)" in counts  # after this process's first batch
    assert counts[-1] == "genodiff sample: samples 6/6 (100%)"
    done = [int(count.split()[-2].split("/")[0]) for count in counts]
    assert done == sorted(done)
    one = net.generate_to_file(tmp_path / "one.fa", 6, LENGTH, **options).path
    assert out.read_bytes() == one.read_bytes()


def test_another_process_share_is_counted_from_its_part_file_as_it_is_written(tmp_path):
    """What the main process's line counts of another process's share: none before it
    writes, as many as its record says while it is staged, all of it once finished."""
    from genodiff.pipeline import _share_written

    net = model()
    options = {"steps": 2, "seed": 3, "batch_size": 2}
    out = tmp_path / "s.fa"
    part, share = tmp_path / ".s.part1of2.fa", range(3, 6)  # the other process's: 3 of 6
    assert _share_written(part, share) == 0
    stop_a_two_process_run_after_a_batch(net, out, options, ranks=[1])
    assert _share_written(part, share) == 2  # its first batch
    with pytest.MonkeyPatch.context() as patch:
        as_process(1, patch)
        net.generate_to_file(out, 6, LENGTH, resume=True, accelerator="cpu", devices=2, **options)
    assert part.exists() and _share_written(part, share) == 3


def test_a_refused_resume_of_a_multi_process_run_names_every_process_share(tmp_path):
    """A resume with another --devices is refused (the shares are blocks of another size),
    and so is a new run over the staged work; each message names the other processes' staged
    shares beside the main one, which that resume needs and a new start must remove (was: only
    the main process's file, "remove it to start again": the shares stayed hidden, taking the
    disk, and a later --devices 2 run tripped on them). Nothing is removed by a refusal."""
    net = model()
    options = {"steps": 2, "seed": 3, "batch_size": 2}
    out = tmp_path / "s.fa"
    stop_a_two_process_run_after_a_batch(net, out, options)
    staged = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    shares = [".s.fa.partial", "..s.part1of2.fa.partial"]  # the data, beside their records
    assert [name for name in shares if name in staged] == shares
    with pytest.raises(InputValueError) as refused:
        net.generate_to_file(out, 6, LENGTH, resume=True, **options)
    message = str(refused.value)
    assert "settings.devices: 2 then, 1 now" in message
    assert "staged beside it: ..s.part1of2.fa.partial)" in message
    with pytest.raises(InputFileExistsError) as new_run:
        net.generate_to_file(out, 6, LENGTH, **options)
    assert str(new_run.value).startswith(f"{tmp_path / shares[0]}, {shares[1]} hold the work")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == staged
    (tmp_path / shares[0]).unlink()  # the main process's share alone: the other one still counts
    with pytest.raises(InputFileExistsError, match=rf"^{tmp_path / shares[1]} holds the work"):
        net.generate_to_file(out, 6, LENGTH, **options)
    (tmp_path / shares[1]).unlink()  # what the messages named: a new run starts
    net.generate_to_file(out, 6, LENGTH, **options)
    one = net.generate_to_file(tmp_path / "one.fa", 6, LENGTH, **options).path
    assert out.read_bytes() == one.read_bytes()
    hidden = [p.name for p in tmp_path.glob(".*")]
    assert [name for name in hidden if not name.endswith(".json")] == []  # records never read


def write_checkpoint(path, net: Model):
    return save_as_trained(path, net.network)


def sample_command(checkpoint, out, *options) -> list[str]:
    return [
        sys.executable, "-m", "genodiff.cli", "sample", "--checkpoint", str(checkpoint),
        "--out", str(out), "--length", str(LENGTH), "--steps", "4", "--seed", "9",
        "--no-progress", *options,
    ]  # fmt: skip


def ctrl_c_as_at_a_terminal() -> None:
    """In a test's child process, before it runs its command: SIGINT taken as a terminal's
    job takes it. A test suite started in the background (``pytest &`` in a script) ignores
    SIGINT, and every process it starts inherits that: a Ctrl-C test's run then drew to its
    end (status 0) or for minutes."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.process_level
@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGINT], ids=["kill -9", "Ctrl-C"])
def test_a_stop_then_resume_ends_with_the_uninterrupted_file(tmp_path, stop, capsys):
    checkpoint = write_checkpoint(tmp_path / "m.ckpt", model())
    many = ["--num-samples", "160", "--batch-size", "4"]
    whole = tmp_path / "whole.fa"
    assert cli.main(sample_command(checkpoint, whole, *many)[3:]) == 0  # in this process
    out = tmp_path / "killed.fa"
    record = tmp_path / ".killed.fa.partial.json"
    process = subprocess.Popen(
        sample_command(checkpoint, out, *many), cwd=ROOT, stderr=subprocess.PIPE, text=True,
        preexec_fn=ctrl_c_as_at_a_terminal,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if record.exists() and json.loads(record.read_text())["items"] >= 16:
            break
        time.sleep(0.05)
    assert process.poll() is None, "the run finished before it could be stopped"
    os.kill(process.pid, stop)
    _, stderr = process.communicate(timeout=120)
    if stop == signal.SIGINT:  # was: a KeyboardInterrupt traceback of ~100 lines
        assert process.returncode == 128 + signal.SIGINT
        assert stderr.strip().splitlines() == [
            "genodiff sample: stopped by Ctrl-C; run the same command with --resume to keep "
            "the samples written and draw the rest"
        ]
    assert not out.exists()
    capsys.readouterr()
    assert cli.main(sample_command(checkpoint, out, *many)[3:]) == 2
    assert "--resume" in capsys.readouterr().err  # a stopped run's work is kept
    subprocess.run(sample_command(checkpoint, out, *many, "--resume"), check=True, cwd=ROOT)
    assert out.read_bytes() == whole.read_bytes()


NOTING_DRIVER = """\
import os, sys, torch
from genodiff import cli, pipeline
real = pipeline.Model._draw
def noting(self, job, todo, progress):
    note = os.path.join({notes!r}, str(os.getpid()))
    with open(note, 'a') as handle:
        handle.write(f'threads {{torch.get_num_threads()}}\\n')
        handle.write(''.join(f'{{i}}\\n' for i in todo))
    return real(self, job, todo, progress)
pipeline.Model._draw = noting
sys.exit(cli.main(sys.argv[1:]))
"""


def noted_draws(notes: Path) -> tuple[list[str], list[str]]:
    """What each process of a run under ``NOTING_DRIVER`` noted, then forgotten: the thread
    counts, and the indices of the sequences drawn (each sorted)."""
    lines = [line for p in notes.iterdir() for line in p.read_text().split("\n") if line]
    for p in notes.iterdir():
        p.unlink()
    threads = sorted(line.split()[1] for line in lines if line.startswith("threads "))
    return threads, sorted(line for line in lines if not line.startswith("threads "))


@pytest.mark.process_level
def test_two_processes_write_the_one_process_file_and_a_resume_draws_nothing(tmp_path, capsys):
    """... with one progress line for the whole run's samples (was: the main process's
    sampler steps, as if its share were the run) and one "Initializing distributed" line (was:
    one per process); each of the 2 processes takes half of --threads (was: Lightning's launch
    set every process to cores / processes threads, whatever --threads said). --resume of the
    finished run finds its file finished in the main process; the other process drew its whole
    share again (and threw it away) before this."""
    checkpoint = write_checkpoint(tmp_path / "m.ckpt", model(conditioning={"labels": ["a", "b"]}))
    options = ["--num-samples", "9", "--batch-size", "2", "--label", "b", "--guidance", "2"]
    one, two = tmp_path / "one.fa", tmp_path / "two.fa"
    assert cli.main(sample_command(checkpoint, one, *options)[3:]) == 0  # in this process
    assert "wrote 9 samples" in capsys.readouterr().out
    notes, driver = tmp_path / "notes", tmp_path / "driver.py"
    notes.mkdir()
    driver.write_text(NOTING_DRIVER.format(notes=str(notes)))
    command = [sys.executable, str(driver), *sample_command(checkpoint, two, *options)[3:]]
    command += ["--accelerator", "cpu", "--devices", "2"]
    command.remove("--no-progress")
    given, command, env = with_more_threads_than_lightning_gives(command)
    env["GENODIFF_PROGRESS"] = "1"
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("genodiff: wrote 9 samples") == 1  # the main process alone
    progress = [line for line in done.stderr.splitlines() if line.startswith("genodiff sample:")]
    assert progress[0].startswith("genodiff sample: samples ") and progress[0].count("/9 (") == 1
    assert progress[-1].startswith("genodiff sample: samples 9/9 (100%)"), done.stderr[-3000:]
    assert done.stderr.count("Initializing distributed") == 1, done.stderr[-3000:]
    assert two.read_bytes() == one.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "driver.py", "m.ckpt", "notes", "one.fa", "two.fa",
    ]  # fmt: skip
    threads, drawn = noted_draws(notes)
    assert threads == [str(given // 2)] * 2
    assert drawn == sorted(str(i) for i in range(9))  # each sequence once, by one process
    again = subprocess.run(
        [*command, "--resume"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert "holds this command's 9 samples already" in again.stdout
    assert noted_draws(notes)[1] == []  # nothing drawn in any process
    assert two.read_bytes() == one.read_bytes()


# A script that draws with two processes from Python (Lightning's launcher runs it again as
# the other process): ``generate_to_file(CHECKPOINT, OUT, LENGTH)``'s 4 samples.
TWO_PROCESS_SCRIPT = """import sys
import genodiff
model = genodiff.load(sys.argv[1])
model.generate_to_file(sys.argv[2], 4, int(sys.argv[3]), steps=2, seed=1, accelerator="cpu",
                       devices=2)
"""


@pytest.mark.process_level
def test_two_processes_from_python_write_the_one_process_file_and_warn_once(tmp_path):
    """``Model.generate_to_file(..., devices=2)`` in a script: the file of one process, and a
    warning both processes meet (a length past the trained windows) shown once, by the main
    process. Was: once per process (the command line's main-process-alone rule did not reach
    Python, where the other process runs the script again)."""
    import genodiff

    checkpoint = write_checkpoint(tmp_path / "m.ckpt", model())
    script, two, length = tmp_path / "script.py", tmp_path / "two.fa", 2 * LENGTH
    script.write_text(TWO_PROCESS_SCRIPT)
    command = [sys.executable, str(script), str(checkpoint), str(two), str(length)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Starting with 2 processes" in done.stderr + done.stdout, done.stderr[-3000:]
    said = f"UserInputWarning: sampling {length} bp from a model trained on windows of {LENGTH}"
    assert done.stderr.count(said) == 1, done.stderr[-3000:]
    with pytest.warns(UserWarning, match=f"sampling {length} bp"):  # one process: this one
        one = genodiff.load(checkpoint).generate_to_file(
            tmp_path / "one.fa", 4, length, steps=2, seed=1
        )
    assert two.read_bytes() == one.path.read_bytes()


def slowed_two_process_run(tmp_path) -> tuple[subprocess.Popen, Path, Path]:
    """A ``sample --devices 2`` run (its own session, as a terminal's job) whose processes
    sleep after each batch (a share takes minutes, at no cost) and note their pid, by local
    rank, in the folder returned once both draw; and the output file. The main process takes
    8 s to stop (as one that lets go of a GPU can)."""
    checkpoint = write_checkpoint(tmp_path / "m.ckpt", model())
    out, notes = tmp_path / "s.fa", tmp_path / "pids"
    notes.mkdir()
    driver = tmp_path / "driver.py"
    driver.write_text(
        "import os, sys, time\n"
        "from genodiff import cli, pipeline\n"
        "real = pipeline.Model._draw\n"
        "def slowed(self, job, todo, progress):\n"
        "    for batch in real(self, job, todo, progress):\n"
        "        rank = os.environ.get('LOCAL_RANK', '0')\n"
        f"        note, written = os.path.join({str(notes)!r}, rank), {str(notes)!r} + rank\n"
        "        with open(written, 'w') as handle:  # beside the notes, then renamed: a note\n"
        "            handle.write(str(os.getpid()))  # is never read half-written (killed)\n"
        "        os.replace(written, note)\n"
        "        yield batch\n"
        "        time.sleep(0.2)\n"
        "pipeline.Model._draw = slowed\n"
        "release = pipeline.SampleStream.release\n"
        "def slow_release(self):\n"
        "    if os.environ.get('LOCAL_RANK', '0') == '0':\n"
        "        time.sleep(8)\n"
        "    release(self)\n"
        "pipeline.SampleStream.release = slow_release\n"
        "sys.exit(cli.main(sys.argv[1:]))\n"
    )
    command = [sys.executable, str(driver), *sample_command(checkpoint, out)[3:]]
    command += ["--num-samples", "2000", "--batch-size", "1", "--accelerator", "cpu"]
    process = subprocess.Popen(
        [*command, "--devices", "2"], cwd=ROOT, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=ctrl_c_as_at_a_terminal,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while len(list(notes.iterdir())) < 2 and process.poll() is None:
        assert time.monotonic() < deadline, "the two processes never drew"
        time.sleep(0.1)
    return process, notes, out


def running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie no parent reaped has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def end_all(process: subprocess.Popen, notes: Path) -> None:
    """Kill what is left of a slowed run (the test failed)."""
    for note in notes.iterdir():
        pid = int(note.read_text())
        if running(pid):
            os.kill(pid, signal.SIGKILL)
    if process.poll() is None:
        process.kill()
        process.wait()


@pytest.mark.process_level
def test_ctrl_c_stops_a_two_process_run_with_one_line(tmp_path):
    """A terminal's Ctrl-C reaches every process of the job. Was: one line per process, or
    none: the other process, stopped first, had Lightning's launcher kill the main one."""
    process, notes, out = slowed_two_process_run(tmp_path)
    try:
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        end_all(process, notes)
    assert process.returncode == 128 + signal.SIGINT
    lines = [line for line in stderr.splitlines() if "genodiff sample:" in line]
    assert lines == [
        "genodiff sample: stopped by Ctrl-C; run the same command with --resume to keep the "
        "samples written and draw the rest"
    ]
    assert not out.exists()


@pytest.mark.process_level
def test_the_other_process_stops_when_the_main_one_is_killed(tmp_path):
    """Was: the other process drew the rest of its share (here minutes; hours in a real run)
    with no process left to take it, then ended with a traceback."""
    process, notes, out = slowed_two_process_run(tmp_path)
    other = int((notes / "1").read_text())
    try:
        process.kill()  # the main process alone, as the kernel's out-of-memory killer does
        process.communicate(timeout=60)
        deadline = time.monotonic() + 60  # its share takes minutes more
        while running(other) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not running(other), "the other process goes on without the main one"
    finally:
        end_all(process, notes)
    assert not out.exists()
    assert [p.name for p in tmp_path.glob(".*.partial")]  # the staged work is kept to resume


def sigint_ignored_as_in_a_background_job() -> None:
    """In a test's child process: SIGINT ignored, as a non-interactive shell starts a
    background job (``genodiff sample ... &`` in a script, ``nohup``), which every process
    the job starts inherits."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# A process that a launcher started (the "child"), with its starter (the "parent"), which ends
# once the child watches it. The child notes, in the file given, its pid, its SIGINT as it
# started, whether a SIGINT from outside (before its starter ends) left it running, and what
# stopped it. Its stop is held for an hour past its SIGINT (``grace``).
WATCHING_CHILD = """
import os, signal, subprocess, sys, time
role, notes = sys.argv[1], sys.argv[2]
def note(line):
    with open(notes, "a") as handle:
        handle.write(line + "\\n")
if role == "parent":
    subprocess.Popen([sys.executable, "-c", sys.argv[3], "child", notes, sys.argv[3]])
    while "watching" not in open(notes).read():
        time.sleep(0.05)
    sys.exit(0)
from genodiff.parallel import stop_when_parent_ends
note(f"pid {os.getpid()}")
note(f"sigint {signal.getsignal(signal.SIGINT)}")
stop_when_parent_ends(poll=0.05, grace=3600)
try:
    os.kill(os.getpid(), signal.SIGINT)  # one from outside: ignored, as the shell asked
    for _ in range(20):
        time.sleep(0.01)
    note("watching")
    while True:
        time.sleep(0.05)
except KeyboardInterrupt:
    note("stopped by KeyboardInterrupt")
"""


@pytest.mark.process_level
def test_a_process_whose_starter_ends_stops_at_once_though_its_shell_ignored_sigint(tmp_path):
    """A run started where SIGINT is ignored (a script's background job, ``nohup``): once its
    main process is killed, the other process stops as at Ctrl-C. Was: its own SIGINT was
    ignored too, and it went on for the 30 s grace (here an hour) before it just exited."""
    notes = tmp_path / "notes"
    notes.write_text("")
    subprocess.run(
        [sys.executable, "-c", WATCHING_CHILD, "parent", str(notes), WATCHING_CHILD],
        cwd=ROOT, check=True, timeout=120, preexec_fn=sigint_ignored_as_in_a_background_job,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while "stopped" not in notes.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = notes.read_text().splitlines()
    child = int(lines[0].split()[1])
    if running(child):  # the test failed: end the hour-long wait
        os.kill(child, signal.SIGKILL)
    assert lines[1:] == [f"sigint {signal.SIG_IGN}", "watching", "stopped by KeyboardInterrupt"], (
        lines
    )


@pytest.mark.process_level
def test_an_error_every_process_meets_is_one_line(tmp_path):
    """Weights so large that the network's output overflows: each process stops at its first
    batch. Was: the same line once per process."""
    net = model()
    with torch.no_grad():
        for parameter in net.network.parameters():
            parameter.mul_(1e18)
    checkpoint = write_checkpoint(tmp_path / "m.ckpt", net)
    out = tmp_path / "s.fa"
    options = ["--num-samples", "9", "--batch-size", "2", "--accelerator", "cpu", "--devices", "2"]
    done = subprocess.run(
        sample_command(checkpoint, out, *options), cwd=ROOT, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("genodiff sample:")]
    assert len(lines) == 1 and "not finite" in lines[0], done.stderr[-3000:]
    assert not out.exists()


def with_more_threads_than_lightning_gives(command: list[str]) -> tuple[int, list[str], dict]:
    """``command`` with ``--threads`` above what Lightning ever gives a process, and an
    environment without thread settings: the threads given, the command, the environment."""
    given = 2 * ((os.cpu_count() or 1) + 1)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "GENODIFF_THREADS")}
    return given, [*command, "--threads", str(given)], env


def test_the_cli_refuses_an_existing_out_before_loading_anything_heavy(tmp_path, capsys):
    checkpoint = write_checkpoint(tmp_path / "m.ckpt", model())
    out = tmp_path / "s.fa"
    out.write_text(">kept\nACGT\n")
    argv = ["sample", "--checkpoint", str(checkpoint), "--out", str(out), "--length", "8"]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.strip().endswith("(--out, --overwrite)")
    assert out.read_text() == ">kept\nACGT\n"
    # --resume with nothing staged: the user's file is no finished run of this command
    assert cli.main([*argv, "--resume"]) == 2
    assert "nothing is staged to resume" in capsys.readouterr().err
    assert out.read_text() == ">kept\nACGT\n"
    # the command's own finished file: nothing to draw, and it says so
    argv[argv.index(str(out))] = str(tmp_path / "t.fa")
    argv += ["--num-samples", "1", "--steps", "2"]
    assert cli.main(argv) == 0 and "wrote 1 sample of" in capsys.readouterr().out
    assert cli.main([*argv, "--resume"]) == 0
    said = capsys.readouterr().out
    assert f"{tmp_path / 't.fa'} holds this command's 1 sample already" in said


@pytest.mark.process_level
def test_eval_on_two_processes_equals_one(tmp_path, capsys):
    """Each process scores a block of the batches, every batch from its own generator: the
    windows, their sums and the result are one process's. The windows are twice the trained
    ones: the warning that says so is said once (was: once per process)."""
    checkpoint = write_checkpoint(tmp_path / "m.ckpt", model())
    fasta = tmp_path / "windows.fa"
    torch.manual_seed(1)
    length = 2 * LENGTH
    bases = "".join("ACGT"[i] for i in torch.randint(0, 4, (length * 11,)).tolist())
    fasta.write_text(f">chrom\n{bases}\n")
    base = [sys.executable, "-m", "genodiff.cli", "eval", "--checkpoint", str(checkpoint)]
    base += ["--file", str(fasta), "--length", str(length), "--batch-size", "2", "--seed", "3"]
    base += ["--t-samples", "2", "--json", "--per-window", "--no-progress"]
    assert cli.main(base[3:]) == 0  # one process: this one
    one = json.loads(capsys.readouterr().out)
    done = subprocess.run(
        [*base, "--accelerator", "cpu", "--devices", "2"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1  # the main process alone prints
    two = json.loads(lines[0])
    warned = [line for line in done.stderr.splitlines() if "trained on windows" in line]
    expected = f"genodiff eval: warning: scoring windows of {length} bp with a model trained "
    assert len(warned) == 1 and warned[0].startswith(expected), done.stderr[-3000:]
    assert [w["window"] for w in two["per_window"]] == [w["window"] for w in one["per_window"]]
    assert len(one["per_window"]) == 11
    for a, b in zip(one["per_window"], two["per_window"], strict=True):
        assert b["tokens"] == a["tokens"]
        assert b["nelbo"] == pytest.approx(a["nelbo"], rel=1e-6)
    assert two["nelbo"] == pytest.approx(one["nelbo"], rel=1e-6)
    assert two["windows_sha256"] == one["windows_sha256"]


def test_the_progress_of_a_two_process_eval_says_it_counts_the_main_process_share(
    tmp_path, monkeypatch
):
    """Was: "scored windows 6/6 (100%)" while the other process still scored the other half,
    as if the main process's share were the run."""
    import io

    from genodiff import evaluate
    from genodiff.parallel import Workers
    from genodiff.progress import Progress

    checkpoint = write_checkpoint(tmp_path / "m.ckpt", model())
    fasta = tmp_path / "windows.fa"
    fasta.write_text(">chrom\n" + "ACGTTGCA" * (LENGTH * 12 // 8) + "\n")  # 12 windows
    monkeypatch.setattr(evaluate, "launch_workers", lambda settings: Workers(0, 2))
    lines = io.StringIO()
    bar = Progress("genodiff eval", stream=lines, interval=0)
    evaluate.evaluate_checkpoint(
        checkpoint, fasta, length=LENGTH, t_samples=1, batch_size=2, device="cpu",
        progress=bar, accelerator="cpu", devices=2,
    )  # fmt: skip
    last = lines.getvalue().splitlines()[-1]
    # 6 batches of 2 windows, the first 3 the main process's
    assert last.startswith("genodiff eval: scored windows 6/6 (100%)")
    assert last.endswith("the main process's share of 2")


@pytest.mark.parametrize("devices", [0, -1])
def test_eval_refuses_a_number_of_processes_that_generate_refuses(tmp_path, devices):
    """Was: devices=0 (falsy) scored in one process, silently, where generate_to_file
    refuses it: the two take their process settings from one place (process_settings)."""
    from genodiff import evaluate

    checkpoint = write_checkpoint(tmp_path / "m.ckpt", model())
    fasta = tmp_path / "windows.fa"
    fasta.write_text(">chrom\n" + "ACGTTGCA" * (LENGTH * 4 // 8) + "\n")  # 4 windows
    processes = dict(accelerator="cpu", devices=devices)
    with pytest.raises(InputValueError, match="Lightning cannot start these processes") as no:
        evaluate.evaluate_checkpoint(
            checkpoint, fasta, length=LENGTH, t_samples=1, device="cpu", **processes
        )
    assert no.value.parameter == ("accelerator", "devices")
    with pytest.raises(InputValueError, match="Lightning cannot start these processes"):
        model().generate_to_file(tmp_path / "s.fa", 2, LENGTH, steps=2, **processes)


def test_a_process_that_finished_its_share_waits_for_the_others_past_half_an_hour(monkeypatch):
    """The process group's timeout bounds the final wait for the other shares. Was torch's
    default, 30 minutes: a resumed sampling whose main share was done, or a fine-tuning whose
    last runs fell unevenly, failed at that wait once another share took longer."""
    from datetime import timedelta

    import lightning.fabric
    from lightning.fabric.strategies import DDPStrategy

    from genodiff.parallel import launch_workers

    class StartedError(Exception):
        pass

    asked = {}

    def fabric(**settings):
        asked.update(settings)
        raise StartedError

    monkeypatch.setattr(lightning.fabric, "Fabric", fabric)
    with pytest.raises(StartedError):
        launch_workers({"accelerator": "cpu", "devices": 2})
    strategy = asked["strategy"]
    assert isinstance(strategy, DDPStrategy)
    assert strategy._timeout >= timedelta(days=1)  # a share of a long fine-tuning or sampling


def test_a_streamed_run_needs_the_memory_of_a_batch_not_of_every_sample():
    """A billion 1-kb samples cannot be held (8 TB of ids) but can be streamed to a file."""
    from genodiff.generate import check_feasible
    from genodiff.samplers.request import SampleRequest

    net = model().network.eval_backbone
    request = SampleRequest(10**9, 1000)
    check_feasible(request, 16, net, held=False)
    with pytest.raises(InputValueError, match="write them to a file as they are drawn"):
        check_feasible(request, 16, net)


def test_a_resume_with_another_prefix_or_template_of_the_same_size_is_refused(
    tmp_path, monkeypatch
):
    """The provenance records a prefix's length and a template's name and generated count
    only, so the job's record also holds what they fix: another prefix of as many bases, or
    another template of the same name and shape, is another job (its samples would otherwise
    be appended to the first one's)."""
    from genodiff import sample_files

    net = model()
    options = {"steps": 2, "seed": 1, "batch_size": 2}

    def kill_after_a_batch(self, start, ids):
        real_write(self, start, ids)
        raise KeyboardInterrupt

    real_write = sample_files.SampleStream.write
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    (first / "t.fa").write_text(">t\n" + "ACGT" * 3 + "n" * (LENGTH - 12) + "\n")
    (second / "t.fa").write_text(">t\n" + "TTGA" * 3 + "n" * (LENGTH - 12) + "\n")
    changes = {
        "prefix": ({"prefix": "ACGTAC"}, {"prefix": "TTTTTT"}),
        "infill": ({"infill": str(first / "t.fa")}, {"infill": str(second / "t.fa")}),
    }
    for name, (before, after) in changes.items():
        out = tmp_path / f"{name}.fa"
        monkeypatch.setattr(sample_files.SampleStream, "write", kill_after_a_batch)
        with pytest.raises(KeyboardInterrupt):
            net.generate_to_file(out, 4, LENGTH, **options, **before)
        monkeypatch.setattr(sample_files.SampleStream, "write", real_write)
        with pytest.raises(InputValueError, match=r"another job \(prefix_or_infill_sha256: '"):
            net.generate_to_file(out, 4, LENGTH, resume=True, **options, **after)
        # the same constraint goes on, and every sample holds it
        net.generate_to_file(out, 4, LENGTH, resume=True, **options, **before)
        fixed = "ACGTAC" if name == "prefix" else "ACGT" * 3
        assert [s[: len(fixed)] for s in read_samples(out)] == [fixed] * 4


def test_a_resume_in_another_dtype_or_with_a_setting_changed_past_six_digits_is_refused(
    tmp_path, monkeypatch
):
    """The provenance writes a temperature to six digits and no dtype for float32, so the
    job's record holds both exactly: a resume in bfloat16 of a float32 run, or at a temperature that
    differs in the seventh digit, draws other sequences and is another job (they would
    otherwise be appended to the first run's); the same settings go on."""
    from genodiff import sample_files

    def kill_after_a_batch(self, start, ids):
        real_write(self, start, ids)
        raise KeyboardInterrupt

    real_write = sample_files.SampleStream.write
    options = {"steps": 2, "seed": 1, "batch_size": 2, "temperature": 0.9}
    out = tmp_path / "out.fa"
    monkeypatch.setattr(sample_files.SampleStream, "write", kill_after_a_batch)
    with pytest.raises(KeyboardInterrupt):
        model().generate_to_file(out, 4, LENGTH, **options)
    monkeypatch.setattr(sample_files.SampleStream, "write", real_write)
    with pytest.raises(InputValueError, match=r"another job \(dtype: 'float32' then, 'bfloat16'"):
        model().to(torch.bfloat16).generate_to_file(out, 4, LENGTH, resume=True, **options)
    nearly = {**options, "temperature": 0.9000001}
    assert f"{nearly['temperature']:g}" == f"{options['temperature']:g}"  # the header's words
    with pytest.raises(InputValueError, match=r"exact\.temperature: '0\.9' then, '0\.9000001'"):
        model().generate_to_file(out, 4, LENGTH, resume=True, **nearly)
    whole = model().generate_to_file(tmp_path / "whole.fa", 4, LENGTH, **options).path
    model().generate_to_file(out, 4, LENGTH, resume=True, **options)
    assert out.read_bytes() == whole.read_bytes()


def test_resume_with_overwrite_replaces_a_file_that_is_not_this_runs(tmp_path, drawn):
    """--resume --overwrite (a job script run again and again): nothing staged and an existing
    file that is not this run's finished one is replaced by the run's samples (it was refused,
    the message asking for the overwrite already given); this run's finished file is kept."""
    net = model()
    options = {"steps": 2, "seed": 5, "batch_size": 2}
    fresh = net.generate_to_file(tmp_path / "fresh.fa", 3, LENGTH, **options).path
    out = tmp_path / "out.fa"
    out.write_text("an older run's samples\n")
    drawn.clear()
    written = net.generate_to_file(out, 3, LENGTH, resume=True, overwrite=True, **options)
    assert not written.finished_before and drawn == [0, 1, 2]
    assert out.read_bytes() == fresh.read_bytes()
    drawn.clear()
    again = net.generate_to_file(out, 3, LENGTH, resume=True, overwrite=True, **options)
    assert again.finished_before and drawn == [] and out.read_bytes() == fresh.read_bytes()
