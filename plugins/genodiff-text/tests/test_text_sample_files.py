"""A text model's sample files read back as written: a sample with no text (the model ended
it at once with [SEP], or padded it all) is an empty sample, in .txt a blank line and in
.jsonl an empty "text"; reading it back keeps it in its place, and ``--resume`` of the finished
file takes it as this run's."""

import pytest
import torch
from genodiff_text.tokenizers import TrainedTokenizer

from genodiff.sample_files import SampleStream, read_samples, write_samples
from genodiff.sample_formats import SamplingRun

CORPUS = ["the cat sat on the mat .", "a dog ran home .", "she said hello ."] * 3
LENGTH = 6
RUN = SamplingRun(checkpoint="text.ckpt", sampler="ancestral", steps=2, seed=7)


@pytest.fixture(scope="module")
def tokenizer():
    return TrainedTokenizer(kind="wordpiece", vocab_size=60).train(CORPUS)


def rows_and_texts(tokenizer) -> tuple[torch.Tensor, list[str]]:
    """Four samples, the middle two with no text: what each one reads as is built by hand."""
    words = tokenizer.encode("the cat sat")
    fill = LENGTH - len(words)
    rows = [
        words + [tokenizer.pad_id] * fill,
        [tokenizer.eos_id] * LENGTH,  # ended at once
        [tokenizer.pad_id] * LENGTH,  # padded all the way
        [tokenizer.eos_id] + words + [tokenizer.pad_id] * (fill - 1),
    ]
    return torch.tensor(rows), ["the cat sat", "", "", "the cat sat"]


@pytest.mark.parametrize("name", ["s.txt", "s.jsonl"])
def test_empty_samples_read_back_in_their_place(tokenizer, tmp_path, name):
    rows, texts = rows_and_texts(tokenizer)
    path = write_samples(rows, tmp_path / name, RUN, tokenizer)
    assert read_samples(path) == texts  # .txt dropped them, .jsonl refused the file


@pytest.mark.parametrize("name", ["s.txt", "s.jsonl"])
def test_resume_takes_a_finished_file_holding_empty_samples(tokenizer, tmp_path, name):
    rows, _ = rows_and_texts(tokenizer)
    path = write_samples(rows, tmp_path / name, RUN, tokenizer)
    before = path.read_bytes()
    stream = SampleStream(path, RUN, tokenizer, len(rows), LENGTH, resume=True)
    assert stream.complete and stream.done == len(rows)  # it was "not this command's file"
    assert stream.finish() == path and path.read_bytes() == before
