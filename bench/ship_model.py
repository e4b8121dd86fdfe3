"""Ship a trained run as a model that loads by name: its export and model card in models/NAME/.

What a shipped model's card must say (issue 35; models/README.md), measured here rather than
typed in: the training data (each file's content sha256 and where to get it), the exact
command, steps, tokens, wall time and hardware, the held-out perplexity on the run's own test
split and on other files (the repository's chr22 slice), and the samples' realism against real
DNA of the test split (k-mer JS divergence beside the real-vs-real floor, GC, discriminator
AUROC). The folder is ``genodiff export``'s (EMA weights) plus ``README.md`` with the front
matter ``genodiff models`` reads. The export names no path of the training machine
(``Model.save_pretrained(portable_data=True)``): each training data file by its repository
path (``data/...``, found from any checkout or wheel) or by its name, with the sha256 of its
content and, for a file genodiff does not ship, ``--data-source`` (where to get it), which
``Model.windows`` says when the file is missing.

    python bench/ship_model.py outputs/chrx_mdlm mdlm-chrx \\
        --summary "MDLM, Caduceus-Ph d118 x 4, 500 M tokens of human chrX (GRCh37)" \\
        --license "weights CC0-1.0; data: public reference sequence (GRCh37)" \\
        --heldout chr22=data/chr22_20-21Mb.fa.gz \\
        --data-source "hs37chrXtrunc.fa.gz of Debian's smalt-examples (data/README.md)" \\
        --command "genodiff train configs/hg38.yaml ..." --hardware "one NVIDIA H200" \\
        --wall-seconds 330 [--num-samples 64] [--num-windows N] [--device D] [--dest models]

The run folder's ``checkpoints/last.ckpt`` is what ships (its EMA weights); a run without EMA
ships its trained weights.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import genodiff
from genodiff.checkpoints.folders import RUN_RECORD_FILE
from genodiff.data.training_files import DATA_FILES_KEY, dotted
from genodiff.devices import resolve_device
from genodiff.domains import domain_of
from genodiff.evaluate import evaluate_checkpoint
from genodiff.metrics.kmers import js_divergence, kmer_spectrum

ROOT = Path(__file__).resolve().parents[1]
TEST_SPLIT = "the run's test split"  # the card's name of the first held-out row


def heldout_rows(
    checkpoint: Path,
    files: dict[str, Path],
    seed: int,
    num_windows: int | None = None,
    device: str | None = None,
) -> list[tuple[str, Any]]:
    """(what was scored, EvalResult): the run's own test split, then each file; at most
    ``num_windows`` windows of each, spread over it (None: every window), on ``device``
    (None: CUDA if present)."""
    score = {"seed": seed, "num_windows": num_windows, "device": device}
    rows = [(TEST_SPLIT, evaluate_checkpoint(checkpoint, **score))]
    rows += [(name, evaluate_checkpoint(checkpoint, path, **score)) for name, path in files.items()]
    return rows


#: Guidance strengths a class-conditional model's card samples each class at: the conditional
#: model p(x | class), and D-CFG at gamma 2 (genodiff.guidance).
GAMMAS = (1.0, 2.0)
#: k of the steering table's k-mer spectra: 256 k-mers, well estimated from 64 samples.
STEERING_K = 4


def class_samples(
    model: genodiff.Model, num_samples: int, seed: int
) -> dict[tuple[str, float], genodiff.Samples]:
    """``num_samples`` samples of every class at every guidance strength of ``GAMMAS``."""
    return {
        (name, gamma): model.generate(num_samples, seed=seed, label=name, guidance=gamma)
        for name in model.classes
        for gamma in GAMMAS
    }


def realism(
    model: genodiff.Model,
    num_samples: int,
    seed: int,
    drawn: dict[tuple[str, float], genodiff.Samples] | None = None,
    references: dict[str, list[str]] | None = None,
) -> dict[str | None, tuple[int, Any]]:
    """(samples compared, the sample-quality suite's metrics) of ``num_samples`` samples
    against the test split: ``{None: ...}``; for a class-conditional model ``{class: ...}``,
    each class's conditional samples (``drawn[class, 1.0]``) against its test windows
    (``references``). The suite holds out as many real windows as samples, so a class with
    fewer than twice ``num_samples`` test windows is compared with half its windows' worth."""
    if model.classes is None:
        samples = model.generate(num_samples, seed=seed)
        return {None: (num_samples, quality(samples, model.windows("test")))}
    compared = {name: min(num_samples, len(references[name]) // 2) for name in model.classes}
    return {
        name: (n, quality(drawn[name, 1.0][:n], references[name])) for name, n in compared.items()
    }


def steering_section(
    drawn: dict[tuple[str, float], genodiff.Samples],
    references: dict[str, list[str]],
    alphabet: str,
    seed: int,
) -> str:
    """The card's verdict of a class-conditional model without an oracle: the k-mer JS
    divergence of each class's samples (each guidance strength) to every class's test
    windows (``references``); steering works where each row is nearest its own class."""
    spectra = {
        name: kmer_spectrum(windows, STEERING_K, alphabet) for name, windows in references.items()
    }
    rows = []
    for (label, gamma), samples in drawn.items():
        drawn_spectrum = kmer_spectrum(list(samples), STEERING_K, alphabet)
        js = {name: js_divergence(drawn_spectrum, spectrum) for name, spectrum in spectra.items()}
        nearest = min(js, key=js.get)
        cells = " | ".join(f"{js[name]:.4f}" for name in references)
        mark = "yes" if nearest == label else f"no: {nearest}"
        rows.append(f"| {label} | {gamma:g} | {cells} | {mark} |")
    names = " | ".join(references)
    n = len(next(iter(drawn.values())))
    return f"""## Steering ({n} samples a row, seed {seed}; {STEERING_K}-mer JS divergence, bits)

Each class's samples against every class's test windows: guidance 1 is the conditional model
p(x | class), 2 is D-CFG at gamma 2. Steering works where each row lies nearest its own class.

| label | guidance | {names} | nearest its class |
|---|---|{"---|" * len(references)}---|
{chr(10).join(rows)}
"""


def quality(samples: genodiff.Samples, reference: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as out:
        return genodiff.evaluate_samples(samples, reference, out=out).metrics


def held_out(result: Any) -> str:
    """Whether the scored windows are held out (``genodiff eval``'s training-overlap check)."""
    if result.overlaps_training_data is None:
        return "unknown"
    if not result.overlaps_training_data:
        return "yes"
    return f"no: {result.training_overlap_share:.0%} of the windows were trained on"


def heldout_lines(name: str, result: Any) -> str:
    """The card's held-out row(s) of one ``EvalResult`` (``name``: what was scored): one for
    an unconditional model; for a class-conditional one the bound given each window's true
    label, p(x | y), where the windows have labels (its test split), and always the bound with
    the null label, p(x): the number an unconditional model's compares with."""
    given_label = (result.nelbo, result.nelbo_se, result.perplexity)
    if result.classes is None:
        scores = [(name, *given_label)]
    else:
        null_label = (
            result.nelbo_unconditional,
            result.nelbo_unconditional_se,
            result.perplexity_unconditional,
        )
        scores = [(f"{name}, p(x): the null label", *null_label)]
        if name == TEST_SPLIT:  # a file's windows have no label: the null label in both
            scores.insert(0, (f"{name}, p(x \\| y): its true label", *given_label))
    return "\n".join(
        f"| {what} | {result.windows} x {result.length} | {held_out(result)} | "
        f"{result.likelihood} | {nelbo:.4f} +- {se or 0:.4f} | {perplexity:.4f} | "
        f"`{result.windows_sha256[:16]}` |"
        for what, nelbo, se, perplexity in scores
    )


def realism_section(metrics: dict[str, Any], num_samples: int, seed: int, label: str | None) -> str:
    """The card's table of one set of realism metrics (``label``: the class sampled)."""
    js, floor, floor_sd = (
        metrics["kmer_js"],
        metrics["kmer_js_real_vs_real"],
        metrics["kmer_js_real_vs_real_sd"],
    )
    kmers = "\n".join(
        f"| {k}-mer JS divergence (bits) | {js[k]:.4f} | {floor[k]:.4f} +- {floor_sd[k]:.4f} |"
        for k in js
    )
    gc, auroc = metrics["gc_content"], metrics["discriminator_auroc"]
    auroc = "-" if auroc is None else f"{auroc:.3f}"  # None: samples near-copies of one another
    what = "the test split" if label is None else f"the test windows of {label}"
    drawn = f"{num_samples} samples" + ("" if label is None else f" with label={label}")
    return f"""## Sample realism ({drawn}, seed {seed}, against {what})

| metric | samples | real vs real |
|---|---|---|
{kmers}
| GC content | {gc["samples_mean"]:.3f} | {gc["reference_mean"]:.3f} |
| discriminator AUROC (0.5: no better than chance at telling them apart) | {auroc} | 0.5 |
"""


def export(model: genodiff.Model, folder: Path, data_source: str | None) -> str:
    """``model`` into ``folder`` as it ships: its EMA weights (its trained ones for a run
    without EMA), its data files named portably, ``data_source`` saying where to get those
    genodiff does not ship. Returns which weights."""
    weights = "ema" if model.network.ema is not None else "raw"
    model.save_pretrained(folder, weights=weights, portable_data=True, data_source=data_source)
    return weights


def found_by(records: list[dict[str, Any]]) -> str:
    """The card's table of how the export names its training data (genodiff.json's
    ``data_files``)."""
    rows = []
    for record in records:
        place = (record["key"], record.get("entry"))
        where = (
            f"shipped: `{record['path']}`"
            if record["path"]
            else f"not shipped: {record['source'] or 'not recorded'}"
        )
        sha = record["content_sha256"] or "not recorded (a folder)"
        rows.append(f"| `{dotted(place)}` | `{record['file']}` | `{sha}` | {where} |")
    return "\n".join(rows)


def copy_example(record: dict[str, Any]) -> str:
    """How a copy of the data file ``record`` names is given to ``windows`` and to ``eval``:
    ``fasta=PATH``; for an entry of a mapping ``fasta_by_label={"human": PATH}`` and
    ``--data fasta_by_label.human=PATH``."""
    key, entry = record["key"], record.get("entry")
    if entry is None:
        return f"e.g. `{key}=PATH`"
    return f'e.g. `{key}={{"{entry}": PATH}}`, on the command line `{key}.{entry}=PATH`'


def card(
    args: argparse.Namespace, model: genodiff.Model, rows, metrics, records, steering: str
) -> str:
    """The model card: front matter for ``genodiff models``, then the facts (``steering``: a
    class-conditional model's ``steering_section``, else empty)."""
    provenance = model.network.provenance
    config = model.network.config
    scored = "\n".join(heldout_lines(name, result) for name, result in rows)
    realism_tables = "\n".join(
        realism_section(m, n, args.seed, label) for label, (n, m) in metrics.items()
    )
    model_config = config["model"]
    backbone = (
        f"{model_config['name']}, d_model {model_config.get('d_model')}, "
        f"{model_config.get('n_layer')} layers"
    )
    return f"""---
summary: {args.summary}
license: {args.license}
---
# {args.name}

{args.summary}.

| | |
|---|---|
| objective | {config["objective"]["name"]} |
| backbone | {backbone} |
| training steps | {provenance.get("global_step")} |
| training tokens | {provenance.get("tokens_seen")} |
| wall time | {args.wall_seconds} s on {args.hardware} |
| command | `{args.command}` |
| licence | {args.license} |

## Training data

The export names its data files by no path of the training machine:
`genodiff.load("{args.name}").windows()` reads the shipped ones wherever genodiff is installed;
for the others it says which file it needs and reads a copy given as
`windows(split, KEY=PATH)` ({copy_example(records[0])}) whose content (decompressed) has the
sha256 below; `genodiff eval --checkpoint {args.name} --data KEY=PATH` scores its test split
from it:

| data key | file | content sha256 | where |
|---|---|---|---|
{found_by(records)}

## Held-out likelihood (`genodiff eval`, seed {args.seed})

| scored | windows x bp | held out | likelihood | nats / token | perplexity | windows sha256 |
|---|---|---|---|---|---|---|
{scored}

{realism_tables}
{steering}
Written by `python bench/ship_model.py` (bench/ship_model.py) from the run's last checkpoint.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a genodiff train output folder")
    parser.add_argument("name", help="the model's name (its folder under --dest)")
    parser.add_argument("--summary", required=True, help="one line for genodiff models")
    parser.add_argument("--license", required=True, help="of the weights and their data")
    parser.add_argument(
        "--data-source", help="where to get the training data files genodiff does not ship"
    )
    parser.add_argument("--heldout", nargs="*", default=[], metavar="NAME=FASTA")
    parser.add_argument("--command", required=True, help="the exact training command")
    parser.add_argument("--hardware", required=True, help='e.g. "one NVIDIA H200"')
    parser.add_argument("--wall-seconds", type=float, required=True)
    parser.add_argument("--num-samples", type=int, default=64)
    parser.add_argument(
        "--num-windows", type=int, default=None, help="scored per file (default: every window)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", help="for scoring and sampling (default: CUDA if present)")
    parser.add_argument("--dest", type=Path, default=ROOT / "models")
    args = parser.parse_args()
    checkpoint = args.run / "checkpoints" / "last.ckpt"
    files = dict(item.split("=", 1) for item in args.heldout)
    model = genodiff.load(checkpoint, device=resolve_device(args.device))  # samples there
    heldout = {k: Path(v) for k, v in files.items()}
    rows = heldout_rows(checkpoint, heldout, args.seed, args.num_windows, args.device)
    drawn = references = None
    steering = ""
    if model.classes is not None:  # every class's samples and test windows, once
        drawn = class_samples(model, args.num_samples, args.seed)
        references = model.class_windows("test")
        alphabet = domain_of(model.tokenizer).alphabet
        steering = steering_section(drawn, references, alphabet, args.seed)
    metrics = realism(model, args.num_samples, args.seed, drawn, references)
    folder = args.dest / args.name
    weights = export(model, folder, args.data_source)
    records = json.loads((folder / RUN_RECORD_FILE).read_text())[DATA_FILES_KEY]
    (folder / "README.md").write_text(card(args, model, rows, metrics, records, steering))
    print(f"wrote {folder} ({weights} weights); `genodiff models {args.name}` shows its card")


if __name__ == "__main__":
    main()
