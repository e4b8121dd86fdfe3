"""Every configs/hg38*.yaml trains for a few steps on the demo genome (a tiny model of the
same family) and `genodiff eval --json` scores its checkpoint."""

import json
import math
import re
from pathlib import Path

import pytest

import genodiff
from genodiff import cli
from genodiff.config import load_config

ROOT = Path(__file__).resolve().parents[1]
HG38_CONFIGS = sorted((ROOT / "configs").glob("hg38*.yaml"))
# Tiny sizes for whichever of these keys the config's model section has.
TINY_MODEL = {"d_model": 16, "n_layer": 1, "d_inner": 32}
TINY_RUN = [
    "data=demo",
    "trainer=cpu",
    "data.max_length=32",
    "data.batch_size=2",
    "data.eval_batch_size=2",
    "trainer.max_steps=2",
    "trainer.val_check_interval=2",
    "trainer.limit_val_batches=1",
    "trainer.limit_test_batches=1",
    "trainer.enable_progress_bar=false",
    "samples.num_samples=1",
    "samples.length=16",
    "samples.steps=4",
]


def test_the_hg38_configs_are_found():
    names = {path.stem for path in HG38_CONFIGS}
    assert {"hg38", "hg38_ar_mamba", "hg38_ar_hyena", "hg38_udlm"} <= names


@pytest.mark.parametrize("config", HG38_CONFIGS, ids=[path.stem for path in HG38_CONFIGS])
def test_the_gpu_trainer_is_one_device_and_ddp_every_one(config):
    # docs/training.md: `gpu` (one GPU), `ddp` (every GPU). Lightning's devices="auto" takes
    # every visible GPU and then picks DDP, which would multiply the global batch.
    assert load_config(config).trainer.devices == 1
    assert load_config(config, ["trainer=ddp"]).trainer.devices == "auto"


@pytest.mark.parametrize("config", HG38_CONFIGS, ids=[path.stem for path in HG38_CONFIGS])
def test_config_trains_on_demo_data_and_evaluates(config, tmp_path, capsys):
    model_section = load_config(config, ["data=demo"]).model
    tiny = [f"model.{key}={value}" for key, value in TINY_MODEL.items() if key in model_section]
    capsys.readouterr()
    genodiff.train(str(config), [*TINY_RUN, *tiny], output_dir=tmp_path)
    printed = capsys.readouterr().out
    checkpoint = tmp_path / "checkpoints" / "last.ckpt"
    args = ["eval", "--checkpoint", str(checkpoint), "--num-windows", "2", "--json"]
    assert cli.main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["windows"] == 2 and result["tokens"] > 0
    assert math.isfinite(result["nelbo"]) and result["nelbo"] > 0
    assert result["perplexity"] == pytest.approx(math.exp(result["nelbo"]), rel=1e-9)
    assert (result["likelihood"] == "exact") == (result["objective"] == "ar")
    # The run's own test line names the same kind of number: an AR model's exact NLL is no
    # NELBO (docs/training.md: AR, "its perplexity is exact").
    measure = "NLL" if result["likelihood"] == "exact" else "NELBO"
    assert re.search(rf"^genodiff: test {measure} \d", printed, re.MULTILINE)
    assert f"({result['likelihood']})" in printed


def test_a_wheels_hg38_download_hint_names_a_folder_the_config_reads(tmp_path, monkeypatch, capsys):
    # Was: "genodiff data hg38 --dest SITE-PACKAGES/genodiff/_bundle/data/hg38", inside the
    # installed package: not the user's to write in, and lost with the next install
    import shutil

    from genodiff import resources
    from tests.test_bad_input_cli import one_line_error

    bundle = tmp_path / "site-packages" / "genodiff" / "_bundle"  # what a wheel installs
    shutil.copytree(ROOT / "configs", bundle / "configs")
    monkeypatch.setattr(resources, "BUNDLE", bundle)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # no configs/ or data/ here
    assert cli.main(["train", "hg38", f"output_dir={work / 'out'}"]) == 2
    err = one_line_error(capsys, "train")
    hint = "Download hg38 with: genodiff data hg38 --dest "
    assert hint in err
    dest = Path(err.split(hint)[1])
    assert dest == work / "data" / "hg38"  # where `genodiff data hg38` (--dest data/hg38) writes
    dest.mkdir(parents=True)
    (dest / "hg38.ml.fa").touch()  # the download's files, in place
    (dest / "human-sequences.bed").touch()
    data = load_config("hg38").data  # read from where the hint put them
    assert (data.fasta, data.bed) == (str(dest / "hg38.ml.fa"), str(dest / "human-sequences.bed"))
