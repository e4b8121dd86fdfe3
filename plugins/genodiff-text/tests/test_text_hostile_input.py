"""Hostile input on a text model: a [MASK] written in a `--prefix` is refused (it used to become
a generated position), and a file scored with `eval --file` says what share of it the
vocabulary reads as [UNK], refusing one that is mostly [UNK] (a FASTA given to a text model)."""

import json
import math

import pytest
from genodiff_text.resources import CONFIGS
from test_text_configs import MDLM_TINY, TINY_TEXT

from genodiff.cli import main


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("text")
    args = ["train", str(CONFIGS / "text_demo.yaml"), *TINY_TEXT, *MDLM_TINY]
    assert main([*args, "samples.num_samples=0", "evaluate_test=false", f"output_dir={out}"]) == 0
    return str(out / "checkpoints" / "last.ckpt")


def one_line_error(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"genodiff {command}: error:") and "\n" not in err, err
    return err


def test_a_mask_token_in_a_prefix_is_refused(checkpoint, tmp_path, capsys):
    out = tmp_path / "s.txt"
    args = ["sample", "--checkpoint", checkpoint, "--num-samples", "1", "--steps", "2"]
    assert main([*args, "--prefix", "the [MASK] sat", "--out", str(out)]) == 2
    err = one_line_error(capsys, "sample")
    assert "the prefix holds the mask token [MASK]" in err and err.endswith("(--prefix)")
    assert not out.exists()
    assert main([*args, "--prefix", "the cat sat", "--out", str(out)]) == 0


def test_eval_of_a_fasta_on_a_text_model_reports_or_refuses_its_unknown_tokens(
    checkpoint, tmp_path, capsys
):
    # WordPiece reads a word of more than 100 characters as one [UNK]: a FASTA of long lines
    # is almost all [UNK] (its header words aside).
    fasta = tmp_path / "genome.fa"
    fasta.write_text(">a\n" + "".join(f"{bases * 40}\n" for bases in ("ACGT", "GATTACA", "TTGCA")))
    capsys.readouterr()
    assert main(["eval", "--checkpoint", checkpoint, "--file", str(fasta)]) == 2
    err = one_line_error(capsys, "eval")  # it used to exit 0 with a perplexity of [UNK]s
    assert "of the tokens of" in err and "read as the unknown token [UNK]" in err
    assert err.endswith("(--file)")

    # Text the vocabulary mostly knows is scored, and the share of [UNK] in it is reported.
    text = tmp_path / "lines.txt"
    text.write_text("the cat sat on the mat .\nshe said \u6f22 .\nthey walked home .\n")  # 漢
    assert main(["eval", "--checkpoint", checkpoint, "--file", str(text), "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0 < result["unknown_fraction"] < 0.25
    assert main(["eval", "--checkpoint", checkpoint, "--file", str(text)]) == 0
    assert "of the tokens are the tokenizer's unknown token" in capsys.readouterr().out


def test_special_token_names_in_a_scored_file_are_read_as_text(checkpoint, tmp_path, capsys):
    # "[MASK]" in a data line used to become the mask id: a data token the masked objective
    # gives probability 0, so each noise draw that masked it added about 1e6 nats (an
    # OverflowError in `genodiff eval`), and one that did not scored it as a given token.
    # Read as text, a name is the characters it is written with: the same windows as the
    # line with its brackets spaced (BERT's pre-tokenizer splits them off either way).
    named, spaced = tmp_path / "named.txt", tmp_path / "spaced.txt"
    named.write_text("she was [MASK] happy .\nthe [PAD] man [SEP] sat .\n")
    spaced.write_text("she was [ mask ] happy .\nthe [ pad ] man [ sep ] sat .\n")
    results = []
    for lines in (named, spaced):
        args = ["eval", "--checkpoint", checkpoint, "--file", str(lines), "--t-samples", "4"]
        assert main([*args, "--json"]) == 0
        results.append(json.loads(capsys.readouterr().out.strip().splitlines()[-1]))
    assert results[0]["windows_sha256"] == results[1]["windows_sha256"]
    assert results[0]["nelbo"] == results[1]["nelbo"] and math.isfinite(results[0]["nelbo"])


def test_scoring_an_empty_text_is_refused_by_index(checkpoint):
    # model.score("") used to give a number: the NELBO of [CLS] [SEP] and padding, a sentence
    # no one gave (a blank line of an `eval --file` file is skipped, never scored).
    import genodiff

    model = genodiff.load(checkpoint, device="cpu")
    with pytest.raises(ValueError, match=r"^sequence 1 is empty \(''\): there is no sentence"):
        model.score(["the cat sat .", ""])
    assert len(model.score(["the cat sat ."])) == 1
