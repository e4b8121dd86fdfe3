"""The demo's commands in the plugin's README, run from its text as a reader copies them (after
the demo's training, at test sizes given last), through the mechanism the core's documentation
tests use (tests/doc_commands.py)."""

from __future__ import annotations

import gzip
import json
import shlex
import sys
from pathlib import Path

from genodiff_text.resources import CORPUS
from test_text_configs import MDLM_TINY, TINY_TEXT

from genodiff.checkpoints import read_checkpoint_file
from genodiff.cli import main
from tests import doc_commands

README = Path(__file__).resolve().parents[1] / "README.md"
REPO = Path(__file__).resolve().parents[3]
SENTENCES = 60  # lines of the bundled corpus in the reader's my_sentences.txt

SMALLER = {  # test sizes for each command of the block, given after the printed options
    "sample": ["--num-samples", "2", "--steps", "4"],
    "eval": [],
    "train": [*TINY_TEXT, *MDLM_TINY, "samples.num_samples=0", "evaluate_test=false"],
}


def test_the_demo_commands_run_as_printed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # outputs/ lands here; the plugin's configs are found anyway
    # The demo (`genodiff train configs/text_demo.yaml`), at test size, where the README says.
    assert main(["train", "configs/text_demo.yaml", *SMALLER["train"]]) == 0
    with gzip.open(CORPUS, "rt", encoding="utf-8") as corpus:
        lines = [next(corpus) for _ in range(SENTENCES)]
    Path("my_sentences.txt").write_text("".join(lines), encoding="utf-8")

    # Its number beside the baselines': `genodiff eval ... > eval.json`, then the bench script.
    block = doc_commands.code_block(README, "# text-demo-baselines")
    evaluate, compare = (shlex.split(line) for line in doc_commands.commands(block))
    assert evaluate[0] == "genodiff" and evaluate[-2] == ">"
    assert compare[:2] == ["python", "bench/text_baselines.py"]
    capsys.readouterr()
    assert main(evaluate[1:-2]) == 0
    Path(evaluate[-1]).write_text(capsys.readouterr().out)
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import text_baselines
    finally:
        sys.path.remove(str(REPO / "bench"))
    text_baselines.main([*compare[2:], "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["run"]["nelbo"] == json.loads(Path("eval.json").read_text())["nelbo"]

    block = doc_commands.code_block(README, "# text-demo-commands")
    commands = doc_commands.commands(block)
    assert [line.split()[1] for line in commands] == ["sample", "sample", "eval", "train"]
    capsys.readouterr()
    doc_commands.run(commands, lambda words: SMALLER[words[1]])

    assert len(Path("samples.txt").read_text().splitlines()) == 2
    rows = [json.loads(row) for row in Path("samples.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(row["text"].startswith("she was") for row in rows)
    printed = capsys.readouterr().out.splitlines()
    scored = json.loads(next(line for line in printed if line.startswith("{")))
    assert scored["source"] == str(Path("my_sentences.txt").resolve())
    assert scored["windows"] == SENTENCES  # one window per sentence
    # The last command trained a run of its own on the reader's file, beside the demo's.
    runs = Path("outputs").glob("*/checkpoints/last.ckpt")
    (trained,) = [path for path in runs if path.parts[1] != "text_demo"]
    config = read_checkpoint_file(trained)["hyper_parameters"]["config"]
    assert config["data"]["path"] == str(Path("my_sentences.txt").resolve())
