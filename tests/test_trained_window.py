"""Sampling or scoring longer sequences than a model was trained on warns (sampling: naming
the semi-ar sampler)."""

import os
import subprocess
import sys
import warnings

import pytest

import genodiff
from genodiff import cli
from genodiff.trained_window import warn_beyond_trained_window
from tests.test_cli import DEMO, ROOT, TINY
from tests.test_sample_cli import checkpoint  # noqa: F401 (a module-scoped fixture: 128-bp windows)

CONFIG = {"data": {"max_length": 128}}
MDLM_SAMPLERS = ("ancestral", "cached", "first-hitting", "semi-ar")


def warnings_of(function, *args, **kwargs) -> list[str]:
    """The trained-window warnings that ``function(*args, **kwargs)`` gives."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        function(*args, **kwargs)
    return [str(w.message) for w in caught if "trained on windows" in str(w.message)]


@pytest.mark.parametrize(
    "length, block, sampler, samplers, expected",
    [
        (129, None, "cached", MDLM_SAMPLERS, ['sampler="semi-ar" with block=128', "129 bp"]),
        (129, None, "ancestral", ("ancestral",), ["at most 128 bp (this model has no semi-ar"]),
        (4096, 200, "semi-ar", MDLM_SAMPLERS, ["a block of 200 bp", "a block of at most 128"]),
    ],
)
def test_longer_than_the_trained_windows_warns(length, block, sampler, samplers, expected):
    args = (CONFIG, length, block, sampler, samplers, "bp")
    (message,) = warnings_of(warn_beyond_trained_window, *args)
    assert "trained on windows of 128 bp (data.max_length)" in message
    assert all(part in message for part in expected), message


@pytest.mark.parametrize(
    "config, length, block, sampler",
    [
        (CONFIG, 128, None, "cached"),  # the trained length itself
        (CONFIG, 4096, 128, "semi-ar"),  # long, from trained-length windows
        ({"data": {}}, 4096, None, "cached"),  # a config that does not say
    ],
)
def test_within_the_trained_windows_is_silent(config, length, block, sampler):
    args = (config, length, block, sampler, MDLM_SAMPLERS, "bp")
    assert warnings_of(warn_beyond_trained_window, *args) == []


def test_generate_warns_beyond_the_trained_window_only(checkpoint):  # noqa: F811
    model = genodiff.load(checkpoint, device="cpu")
    (message,) = warnings_of(model.generate, 1, length=200, steps=2)
    assert message.startswith("sampling 200 bp from a model trained on windows of 128 bp")
    assert 'sampler="semi-ar" with block=128 and a smaller stride, such as stride=64' in message
    assert "--" not in message  # generate's arguments, not genodiff sample's options
    assert warnings_of(model.generate, 1, length=128, steps=2) == []
    assert warnings_of(model.generate, 1, steps=2) == []  # the default: the trained length


def test_genodiff_sample_prints_the_warning(checkpoint, tmp_path):  # noqa: F811
    out = tmp_path / "long.fa"
    options = ["--length", "150", "--num-samples", "1", "--steps", "2", "--out", str(out)]
    command = [sys.executable, "-m", "genodiff.cli", "sample", "--checkpoint", checkpoint, *options]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "trained on windows" in line]
    assert line.startswith("genodiff sample: warning: sampling 150 bp from a model trained on ")
    assert line.endswith("(--sampler, --block, --stride, --length)")  # the CLI's spelling
    assert out.is_file()


def test_a_training_whose_own_samples_are_longer_than_its_windows_says_so_first(tmp_path, capsys):
    # Was: silent; the run's samples.length (1,024 unless set) is drawn whatever the window
    options = [o for o in TINY if not o.startswith(("samples.length", "samples.num_samples"))]
    options += ["samples.length=200", "samples.num_samples=1", "trainer.max_steps=1"]
    assert cli.main(["train", DEMO, *options, f"output_dir={tmp_path / 'run'}"]) == 0
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if "trained on windows" in line]
    assert line.startswith("genodiff train: warning: sampling 200 bp from a model trained on ")
    assert "windows of 128 bp (data.max_length)" in line  # TINY's data.max_length
    assert "--" not in line  # genodiff sample's options are no options of genodiff train
    # what a run can do: its samples section draws with no semi-ar sampler (was: advised it)
    assert line.endswith(
        "keep samples.length at most 128 bp, and draw longer ones from the trained model with "
        "the semi-ar sampler"
    )


def test_scoring_a_sequence_longer_than_the_trained_windows_warns(checkpoint):  # noqa: F811
    # Was: silent, while generate warned; a sequence is read whole, as one window
    model = genodiff.load(checkpoint, device="cpu")
    long, short = "ACGT" * 40, "ACGT" * 32  # 160 and 128 bp, against windows of 128
    (message,) = warnings_of(model.score, [short, long], t_samples=1)
    assert message.startswith("scoring a sequence of 160 bp with a model trained on windows ")
    assert "of 128 bp (data.max_length)" in message and "pieces of at most 128 bp" in message
    assert warnings_of(model.score, [short], t_samples=1) == []


def test_eval_with_longer_windows_than_the_trained_ones_says_so(checkpoint, capsys):  # noqa: F811
    fasta = ROOT / "data" / "chr22_20-21Mb.fa.gz"
    options = ["eval", "--checkpoint", checkpoint, "--file", str(fasta), "--num-windows", "2"]

    def said(length: int) -> list[str]:
        assert cli.main([*options, "--t-samples", "1", "--length", str(length)]) == 0
        return [x for x in capsys.readouterr().err.splitlines() if "trained on windows" in x]

    (line,) = said(256)
    assert line.startswith("genodiff eval: warning: scoring windows of 256 bp with a model ")
    assert "trained on windows of 128 bp" in line
    assert line.endswith("give a length of at most 128 bp, or none (--length)")
    assert said(128) == []


def test_evaluate_checkpoint_warns_in_its_own_terms(checkpoint):  # noqa: F811
    # Was: "(genodiff eval --length)" from Python too, whose argument is length=
    from genodiff.evaluate import evaluate_checkpoint

    fasta = ROOT / "data" / "chr22_20-21Mb.fa.gz"
    options = {"data_file": fasta, "length": 256, "num_windows": 1, "t_samples": 1}
    (message,) = warnings_of(evaluate_checkpoint, checkpoint, device="cpu", **options)
    assert message.endswith("give a length of at most 128 bp, or none")
    assert "--" not in message


# HyenaDNA reads at most l_max tokens (its filter length). A window or a sample longer than
# that was found only by the network's first call: in training after the run folder was
# written, in sampling after l_max tokens had been drawn, in words naming no setting.
HYENA = str(ROOT / "configs" / "hg38_ar_hyena.yaml")
SHORT_FILTER = ["model.layer.l_max=40", "model.d_model=16", "model.n_layer=1", "model.d_inner=32"]
HYENA_RUN = ["data=demo", "trainer=cpu", *SHORT_FILTER, *TINY[2:]]  # TINY less its model/length


def test_hyena_declares_its_filter_length_as_its_longest_input():
    from genodiff.backbones.hyena import HyenaDNA

    backbone = HyenaDNA(d_model=16, n_layer=2, d_inner=32, vocab_size=12, layer={"l_max": 40})
    assert backbone.capabilities.max_length == 40


@pytest.mark.parametrize(
    "too_long, setting",
    [
        (["data.max_length=41", "samples.num_samples=0"], "data.max_length=41"),
        (["data.max_length=32", "samples.num_samples=1", "samples.length=41"], "samples.length=41"),
    ],
)
def test_a_training_longer_than_hyenas_filter_is_refused_before_it_writes(
    too_long, setting, tmp_path, capsys
):
    from tests.test_bad_input_cli import one_line_error

    out = tmp_path / "run"
    assert cli.main(["train", HYENA, *HYENA_RUN, *too_long, f"output_dir={out}"]) == 2
    err = one_line_error(capsys, "train")
    assert f"{setting}: the HyenaDNA backbone reads at most 40 tokens" in err
    assert "model.layer.l_max" in err  # what else can be changed
    assert not out.exists()  # nothing half-written


@pytest.fixture(scope="module")
def short_filter_run(tmp_path_factory) -> str:
    """A HyenaDNA run whose filter reads at most 40 tokens, trained on windows of 32."""
    out = tmp_path_factory.mktemp("hyena") / "run"
    options = [*HYENA_RUN, "data.max_length=32", "samples.num_samples=0"]
    assert cli.main(["train", HYENA, *options, f"output_dir={out}"]) == 0
    return str(out)


def test_sampling_longer_than_hyenas_filter_is_refused_before_it_draws(short_filter_run):
    model = genodiff.load(short_filter_run, device="cpu")
    calls = []
    model.network.eval_backbone.register_forward_pre_hook(lambda *_: calls.append(1))
    with pytest.raises(ValueError, match=r"length=41: the HyenaDNA backbone reads at most 40") as e:
        model.generate(1, length=41)
    assert "use a model trained with a longer model.layer.l_max" in str(e.value)  # what to do
    assert calls == []  # refused before the first network call
    assert len(model.generate(1, length=40)[0]) == 40  # the filter's length itself is fine


def test_eval_longer_than_hyenas_filter_says_what_to_do_before_it_reads(
    short_filter_run, tmp_path, capsys
):
    # Was: the file indexed, then the network's own words at its first call ("while scoring
    # 41-token windows: sequence length 41 exceeds the filter length l_max=40"), no way out
    from tests.test_bad_input_cli import one_line_error

    fasta = tmp_path / "chr22.fa.gz"
    fasta.write_bytes((ROOT / "data" / "chr22_20-21Mb.fa.gz").read_bytes())
    options = ["--file", str(fasta), "--num-windows", "2", "--t-samples", "1", "--length", "41"]
    assert cli.main(["eval", "--checkpoint", short_filter_run, *options]) == 2
    err = one_line_error(capsys, "eval")
    assert "length=41: the HyenaDNA backbone reads at most 40 tokens (model.layer.l_max)" in err
    assert "keep length at most 40, or use a model trained with a longer model.layer.l_max" in err
    assert err.endswith("(--length)")  # the option, in the CLI's spelling
    assert sorted(p.name for p in tmp_path.iterdir()) == [fasta.name]  # no index written


def test_scoring_longer_than_hyenas_filter_names_the_sequence_and_what_to_do(short_filter_run):
    # Was: the network's own words at its first call ("sequence length 41 exceeds the filter
    # length l_max=40"), which named neither the sequence nor a way out.
    model = genodiff.load(short_filter_run, device="cpu")
    calls = []
    model.network.eval_backbone.register_forward_pre_hook(lambda *_: calls.append(1))
    with pytest.raises(ValueError) as refused:
        model.score(["ACGT" * 5, "ACGT" * 10 + "A", "ACGT" * 10 + "C"])
    message = str(refused.value)
    assert message.startswith("len(sequences[1])=41: the HyenaDNA backbone reads at most 40")
    assert "use a model trained with a longer model.layer.l_max" in message
    assert calls == []  # refused before the first network call
    assert len(model.score(["ACGT" * 10])) == 1  # the filter's length itself is fine
