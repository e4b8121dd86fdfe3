"""More than one process: ``trainer.strategy=ddp trainer.devices=2 trainer.accelerator=cpu``
(gloo) trains exactly like one process with twice the batch; the processes see disjoint
windows, only rank 0 writes, held-out metrics cover every window once, and the checkpoint
serves eval and fine-tuning like any other."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from genodiff import cli
from genodiff.config import load_config
from genodiff.data.loaders import EpochShuffleSampler, HeldoutShard
from genodiff.finetune.classifier import load_backbone
from tests.test_cli import DEMO, ROOT, read_metrics

RUN = [
    "model=caduceus_tiny",
    "data.max_length=128",
    "trainer.max_steps=6",
    "trainer.val_check_interval=3",
    "trainer.limit_val_batches=2",
    "trainer.limit_test_batches=2",
    "trainer.log_every_n_steps=1",
    "trainer.enable_progress_bar=false",
    "samples.num_samples=2",
    "samples.length=32",
    "samples.steps=4",
]
ONE_PROCESS = ["data.batch_size=4", "data.eval_batch_size=8"]
TWO_PROCESSES = [
    "data.batch_size=2",
    "data.eval_batch_size=4",
    "trainer.strategy=ddp",
    "trainer.devices=2",
    "trainer.accelerator=cpu",
]


def train(out, overrides) -> str:
    """``genodiff train`` in a process of its own (Lightning's DDP launcher starts rank 1 by
    running the same command again); its stdout + stderr."""
    command = [sys.executable, "-m", "genodiff.cli", "train", DEMO, *RUN, *overrides]
    done = subprocess.run(
        [*command, f"output_dir={out}"], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ddp")
    one, two = folder / "one", folder / "two"
    train(one, ONE_PROCESS)
    return one, two, train(two, TWO_PROCESSES)


def by_step(rows: list[dict], key: str) -> dict[int, float]:
    return {int(r["step"]): float(r[key]) for r in rows if r.get(key)}


def load(path):
    return torch.load(path, map_location="cpu", weights_only=True)


@pytest.mark.process_level
def test_two_processes_train_like_one_with_twice_the_batch(runs):
    one, two, _ = runs
    expected, got = read_metrics(one), read_metrics(two)
    for key in ("train/nelbo", "val/nelbo", "test/nelbo"):
        assert by_step(expected, key), key
        assert by_step(got, key) == pytest.approx(by_step(expected, key), rel=1e-5), key
    a, b = load(one / "checkpoints" / "last.ckpt"), load(two / "checkpoints" / "last.ckpt")
    assert a["global_step"] == b["global_step"] == 6
    for name, value in a["state_dict"].items():  # weights and EMA
        torch.testing.assert_close(b["state_dict"][name], value, rtol=1e-4, atol=1e-5)
    # Tokens seen count both processes: 6 steps x (2 x 2) windows x 128 bp.
    assert a["genodiff_run"]["tokens_seen"] == b["genodiff_run"]["tokens_seen"] == 6 * 4 * 128


@pytest.mark.process_level
def test_only_rank_0_writes(runs):
    _, two, output = runs
    assert output.count("genodiff: training demo") == 1
    assert output.count("genodiff: wrote 2 samples") == 1
    assert sorted(p.name for p in (two / "checkpoints").iterdir()) == [
        "best-step6.ckpt",
        "last.ckpt",
    ]
    assert [p.name for p in (two / "logs").iterdir()] == ["version_0"]
    assert (two / "samples.fa").read_text().count(">") == 2


@pytest.mark.process_level
def test_eval_and_finetune_take_a_ddp_checkpoint(runs, toy, capsys):
    one, two, _ = runs
    scores = []
    for run in (one, two):
        args = ["eval", "--checkpoint", str(run / "checkpoints" / "last.ckpt"), "--json"]
        assert cli.main([*args, "--num-windows", "4", "--seed", "3"]) == 0
        scores.append(json.loads(capsys.readouterr().out))
    assert scores[1]["tokens"] == scores[0]["tokens"] > 0
    assert scores[1]["windows_sha256"] == scores[0]["windows_sha256"]
    assert scores[1]["nelbo"] == pytest.approx(scores[0]["nelbo"], rel=1e-4)
    ddp_backbone = load_backbone(str(two / "checkpoints" / "last.ckpt"))
    for name, value in load_backbone(str(one / "checkpoints" / "last.ckpt")).state_dict().items():
        torch.testing.assert_close(ddp_backbone.state_dict()[name], value, rtol=1e-4, atol=1e-5)
    config, out = toy
    checkpoint = two / "checkpoints" / "last.ckpt"
    assert cli.main(["finetune", str(config), f"pretrained={checkpoint}"]) == 0
    assert (out / "results.json").is_file()


class Items:
    """A dataset of ``n`` items whose ids are their index."""

    def __init__(self, n: int) -> None:
        self.n, self.epochs = n, []

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": torch.full((3,), index)}

    def set_epoch(self, epoch: int) -> None:
        self.epochs.append(epoch)


@pytest.mark.parametrize("world, batch", [(2, 3), (3, 2), (4, 1)])
def test_each_process_takes_its_block_of_every_global_batch(world, batch):
    data = Items(23)
    whole = EpochShuffleSampler(data, seed=5, batch_size=world * batch)
    whole.set_epoch(2)
    order = list(whole)
    assert sorted(order) == list(range(23))
    shares = []
    for rank in range(world):
        sampler = EpochShuffleSampler(data, seed=5, batch_size=batch, rank=rank, world_size=world)
        sampler.set_epoch(2)
        shares.append(list(sampler))
    steps = 23 // (world * batch)  # the tail that fills no global batch is left out
    assert {len(share) for share in shares} == {steps * batch}
    for step in range(steps):  # a global batch of one process = the blocks of the others
        expected = order[step * world * batch : (step + 1) * world * batch]
        got = [i for share in shares for i in share[step * batch : (step + 1) * batch]]
        assert got == expected
    seen = [i for share in shares for i in share]
    assert len(seen) == len(set(seen))  # disjoint


def test_a_resumed_share_goes_on_where_it_stopped():
    data = Items(20)
    sampler = EpochShuffleSampler(data, seed=1, batch_size=2, rank=1, world_size=2)
    sampler.set_epoch(3)
    share = list(sampler)
    sampler.resume(3, 4)  # two batches of 2 consumed
    assert list(sampler) == share[4:]
    assert list(sampler) == share  # the pass after that starts the epoch again


def test_heldout_shards_cover_every_window_once_and_pad_the_last_batch():
    data, world, batch, pad = Items(11), 3, 2, -1
    shards = [HeldoutShard(data, batch, rank, world, pad) for rank in range(world)]
    assert {len(s) for s in shards} == {4}  # ceil(11 / 6) = 2 global batches of 2 per process
    rows = [s[i]["input_ids"][0].item() for s in shards for i in range(len(s))]
    assert sorted(r for r in rows if r != pad) == list(range(11))
    assert rows.count(pad) == 2 * world * batch - 11
    assert [shards[r][2]["input_ids"][0].item() for r in range(world)] == [6, 8, 10]


def test_trainer_groups_for_several_processes(tmp_path, capsys):
    ddp = load_config(DEMO, ["trainer=ddp"]).trainer
    assert (ddp.strategy, ddp.devices, ddp.num_nodes) == ("ddp", "auto", 1)
    assert ddp.accumulate_grad_batches == 8 and ddp.check_val_every_n_epoch is None  # gpu.yaml
    fsdp = load_config(DEMO, ["trainer=fsdp", "trainer.num_nodes=2"]).trainer
    assert (fsdp.strategy, fsdp.num_nodes) == ("fsdp", 2)
    # FSDP needs GPUs: on a CPU it is one clear line, and nothing is written.
    out = tmp_path / "fsdp"
    args = ["train", DEMO, "trainer=fsdp", "trainer.accelerator=cpu", f"output_dir={out}"]
    assert cli.main(args) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("genodiff train: error:") and "fsdp" in line and "GPU" in line
    assert not out.exists()
