"""The text domain: samples one per line (or JSON Lines), infilling templates and files to
score as text."""

from __future__ import annotations

from genodiff.domains import Domain


class TextDomain(Domain):
    """Samples go to ``samples.txt`` (or .jsonl); an infilling template is the first non-empty
    line with the tokenizer's mask token at each token to generate; ``genodiff eval --file``
    reads a text file of one sentence per line."""

    name = "text"
    samples_file = "samples.txt"
    eval_file = "a UTF-8 text file, one sentence per line, plain or gzip"
    # The AR runs of text_demo_ar.yaml and lm1b_ar.yaml.
    default_ar_checkpoints = (
        "outputs/text_demo_ar/checkpoints/last.ckpt",
        "outputs/lm1b_ar/checkpoints/last.ckpt",
    )
