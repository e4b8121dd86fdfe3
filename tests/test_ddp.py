"""More than one process: ``trainer.strategy=ddp trainer.devices=2 trainer.accelerator=cpu``
(gloo) trains exactly like one process with twice the batch; the processes see disjoint
windows, only rank 0 writes, held-out metrics cover every window once, and the checkpoint
serves eval and fine-tuning like any other. A plugin data module gets the same split from the
``DataModule`` base, and no data module can bypass it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import lightning
import pytest
import torch
from torch import nn

from genodiff import cli, registry
from genodiff.config import ConfigError, load_config
from genodiff.data.base import DataModule
from genodiff.data.build import build_datamodule
from genodiff.data.datamodule import FastaDataModule
from genodiff.data.loaders import EpochShuffleSampler, HeldoutShard
from genodiff.finetuning.classifier import load_backbone
from genodiff.tokenizers import DNATokenizer
from genodiff.training.lightning_data import LightningData
from genodiff.training.module import GenerativeTrainingModule
from tests.test_classifiers_training import write_toy
from tests.test_cli import DEMO, ROOT, read_metrics
from tests.test_finetune_protocol import model_from_the_defaults_list
from tests.test_sampling_at_scale import running, with_more_threads_than_lightning_gives

DNA = DNATokenizer()
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
    args = ["train", DEMO, *RUN, *ONE_PROCESS, f"output_dir={one}"]
    assert cli.main(args) == 0  # the one-process reference: in this process
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
    ddp_backbone, _ = load_backbone(str(two / "checkpoints" / "last.ckpt"))
    single, _ = load_backbone(str(one / "checkpoints" / "last.ckpt"))
    for name, value in single.state_dict().items():
        torch.testing.assert_close(ddp_backbone.state_dict()[name], value, rtol=1e-4, atol=1e-5)
    config, out = toy
    model_from_the_defaults_list(config)  # its own model section would be another backbone
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


class PredictsA(nn.Module):
    """Puts all but about e^-30 of its mass on A at every position: a window of A's costs
    nothing, a masked [PAD] about 30 nats."""

    def __init__(self) -> None:
        super().__init__()
        logits = torch.full((16,), -30.0)
        logits[DNA.encode("A")[0]] = 0.0
        self.logits = nn.Parameter(logits)

    def forward(self, input_ids, sigma=None, **conditioning):
        return self.logits.expand(*input_ids.shape, -1)


@pytest.mark.parametrize("labelled", [False, True])
def test_filler_rows_of_the_last_heldout_batch_add_nothing_when_pad_is_scored(labelled):
    # objective.padding=bound scores [PAD] like any token, so the all-[PAD] rows HeldoutShard
    # completes the last global batch with were scored too: val/test NELBO and token counts
    # under DDP depended on how many were needed (here 30 more tokens and ~ 30 nats each).
    length, batch, world = 32, 4, 2
    windows = [{"input_ids": torch.full((length,), DNA.encode("A")[0])} for _ in range(5)]
    if labelled:
        windows = [{**w, "labels": torch.tensor(i % 2)} for i, w in enumerate(windows)]
    shard = HeldoutShard(windows, batch, rank=1, world_size=world, pad_id=DNA.pad_id)
    rows = [shard[i] for i in range(batch)]  # rank 1: window 4, then three filler rows
    config = {
        "model": {"name": "caduceus", "d_model": 8, "n_layer": 1},
        "objective": {"name": "mdlm", "padding": "bound"},
        "ema": {"decay": 0.0},
        **({"conditioning": {"labels": ["even", "odd"]}} if labelled else {}),
    }
    module = GenerativeTrainingModule(config)
    module.backbone = PredictsA()
    module._trainer = SimpleNamespace(global_rank=1, world_size=world)
    module._start_heldout()
    module._heldout_step(torch.utils.data.default_collate(rows))
    assert module.heldout_tokens.compute().item() == length  # one real window
    assert module.heldout_nelbo.compute().item() == pytest.approx(0.0, abs=1e-6)
    if labelled:
        assert module.heldout_nelbo_unconditional.compute().item() == pytest.approx(0.0, abs=1e-6)


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


# A data plugin written to the contract of genodiff.data.base.DataModule (datasets, no loaders),
# found through an entry point as an installed plugin would be. Its train windows record which
# items each process reads.
PLUGIN_SOURCE = """
from pathlib import Path

import torch
import torch.distributed as dist

from genodiff.data.base import DataModule


class RandomWindows:
    def __init__(self, count, max_length, seed, log):
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(7, 11, (count, max_length), generator=generator)  # A C G T
        self.log = log

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, index):
        if self.log:
            rank = dist.get_rank() if dist.is_initialized() else 0
            with open(Path(self.log) / f"rank{rank}.txt", "a") as record:
                record.write(f"{index}\\n")
        return {"input_ids": self.ids[index]}

    def item_name(self, index):
        return f"window {index}"


class RandomDNA(DataModule):
    domain = "dna"
    file_option = "--fasta"

    def __init__(
        self,
        windows: int = 12,
        max_length: int = 32,
        log: str = "",
        batch_size: int = 4,
        eval_batch_size: int | None = None,
        num_workers: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__(batch_size, eval_batch_size, num_workers, seed)
        self.windows, self.max_length, self.log = windows, max_length, log

    def check_files(self) -> None:
        pass

    def dataset_of(self, split: str) -> RandomWindows:
        seed = ("train", "valid", "test").index(split)
        return RandomWindows(self.windows, self.max_length, seed, self.log if seed == 0 else "")

    def heldout_dataset(self, split: str = "test") -> RandomWindows:
        return self.dataset_of(split)

    def file_dataset(self, path) -> RandomWindows:
        raise ValueError("RandomDNA reads no files")
"""
WINDOWS, GLOBAL_BATCH = 12, 4  # one epoch = 3 global batches


def install_plugin(folder) -> None:
    """``folder``: the module and the dist-info that declares its entry point."""
    (folder / "random_dna_plugin.py").write_text(textwrap.dedent(PLUGIN_SOURCE))
    info = folder / "random_dna_plugin-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: random-dna-plugin\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[genodiff.data]\nrandom_dna = random_dna_plugin:RandomDNA\n"
    )


def read_indices(path) -> list[int]:
    return [int(line) for line in path.read_text().split()]


@pytest.mark.process_level
def test_a_plugin_data_module_splits_every_global_batch_over_the_processes(tmp_path):
    plugin, log, expected_log = tmp_path / "plugin", tmp_path / "log", tmp_path / "expected"
    for folder in (plugin, log, expected_log):
        folder.mkdir()
    install_plugin(plugin)
    configs = tmp_path / "configs"
    configs.mkdir()
    for group in ("model", "objective", "trainer"):
        (configs / group).symlink_to(ROOT / "configs" / group)
    config = configs / "plugin.yaml"
    config.write_text(
        f"""defaults: [{{model: caduceus_tiny}}, {{objective: mdlm}}, {{trainer: cpu}}, _self_]
name: plugin_ddp
output_dir: {tmp_path / "run"}
tokenizer: {{name: dna}}
data: {{name: random_dna, windows: {WINDOWS}, log: {log}, batch_size: {GLOBAL_BATCH // 2}}}
samples: {{num_samples: 2, length: 16, steps: 2}}
trainer: {{max_steps: 3, val_check_interval: 3, limit_val_batches: 1, limit_test_batches: 1,
          enable_progress_bar: false, strategy: ddp, devices: 2, accelerator: cpu}}
"""
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin), str(ROOT)])}
    command = [sys.executable, "-m", "genodiff.cli", "train", str(config)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [read_indices(log / f"rank{rank}.txt") for rank in (0, 1)]
    # Disjoint halves of one epoch: together every window exactly once.
    assert [len(share) for share in ranks] == [WINDOWS // 2] * 2
    assert sorted(ranks[0] + ranks[1]) == list(range(WINDOWS))

    # One process with the global batch (its loader, with no trainer: no split) reads the same
    # global batches; rank r reads the r-th half of each.
    sys.path.insert(0, str(plugin))
    try:
        from random_dna_plugin import RandomDNA
    finally:
        sys.path.remove(str(plugin))
    one = RandomDNA(windows=WINDOWS, log=str(expected_log), batch_size=GLOBAL_BATCH)
    batches = [batch["input_ids"] for batch in one.train_dataloader()]
    assert [len(batch) for batch in batches] == [GLOBAL_BATCH] * 3
    expected = read_indices(expected_log / "rank0.txt")
    half = GLOBAL_BATCH // 2
    for step in range(3):
        got = ranks[0][step * half : (step + 1) * half] + ranks[1][step * half : (step + 1) * half]
        assert got == expected[step * GLOBAL_BATCH : (step + 1) * GLOBAL_BATCH]


def test_a_data_module_cannot_bring_loaders_that_skip_the_split():
    with pytest.raises(TypeError, match="OwnLoader defines train_dataloader: .* dataset_of"):

        class OwnLoader(DataModule):
            def train_dataloader(self):
                return []


def test_a_data_module_cannot_define_a_hook_lightning_never_calls_on_it():
    with pytest.raises(TypeError, match="Teardown defines teardown: .* no LightningDataModule"):

        class Teardown(DataModule):
            def teardown(self, stage):
                pass


def test_the_trainer_reads_a_data_module_through_lightning_data():
    """Lightning attaches its Trainer to the ``LightningData`` it is handed: the wrapped data
    module's loaders then take that Trainer's process's share."""
    datamodule = FastaDataModule(max_length=128, eval_batch_size=4)
    data = LightningData(datamodule)
    assert data.trainer is None and datamodule.trainer is None  # one process
    rank_1_of_2 = SimpleNamespace(global_rank=1, world_size=2)
    data.trainer = rank_1_of_2  # what Trainer.fit does to the data module it is given
    assert datamodule.trainer is rank_1_of_2
    data.setup("validate")
    shard = data.val_dataloader().dataset
    assert isinstance(shard, HeldoutShard) and (shard.rank, shard.world_size) == (1, 2)
    valid = datamodule.dataset_of("valid")
    # rank 1 of 2 reads the second block of 4 of each global batch of 8
    assert torch.equal(shard[0]["input_ids"], valid[4]["input_ids"])


def test_lightning_data_saves_and_restores_the_data_modules_state():
    class Counting(FastaDataModule):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.passes = 0

        def state_dict(self):
            return {"passes": self.passes}

        def load_state_dict(self, state):
            self.passes = state["passes"]

    saved = Counting()
    saved.passes = 3
    restored = Counting()
    LightningData(restored).load_state_dict(LightningData(saved).state_dict())
    assert restored.passes == 3


def test_a_data_plugin_that_is_not_a_genodiff_data_module_is_refused(monkeypatch):
    class PlainLightning(lightning.LightningDataModule):
        pass

    monkeypatch.setitem(registry._REGISTRIES["data"], "plain", PlainLightning)
    with pytest.raises(ConfigError, match="data.name='plain' is .*PlainLightning.*DataModule"):
        build_datamodule({"name": "plain"})


# ------------------------------------------------------------------ classifier and finetune


def command(*args: str) -> str:
    """``genodiff ARGS`` in a process of its own; its stdout + stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "genodiff.cli", *args, "--no-progress"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


def in_this_process(capsys: pytest.CaptureFixture, *args: str) -> str:
    """``genodiff ARGS`` run by this process (a one-process reference needs no process of its
    own); what it printed."""
    capsys.readouterr()
    assert cli.main([*args, "--no-progress"]) == 0
    printed = capsys.readouterr()
    return printed.out + printed.err


CLASSIFIER_RUN = [
    "trainer.max_steps=6",
    "trainer.val_check_interval=3",
    "trainer.log_every_n_steps=1",
]


@pytest.mark.process_level
def test_a_classifier_trains_on_two_processes_like_one_with_twice_the_batch(tmp_path, capsys):
    config, _ = write_toy(tmp_path)
    one, two = tmp_path / "one", tmp_path / "two"
    reference = ["classifier", str(config), *CLASSIFIER_RUN, "data.batch_size=16"]
    in_this_process(capsys, *reference, f"output_dir={one}")
    output = command(
        "classifier", str(config), *CLASSIFIER_RUN, "data.batch_size=8", *TWO_PROCESSES[2:],
        f"output_dir={two}",
    )  # fmt: skip
    assert output.count("genodiff: training a noisy classifier") == 1  # rank 0 alone
    assert output.count("genodiff: wrote") == 1
    assert not (two / ".lock").exists() and (two / "config.yaml").is_file()
    expected, got = read_metrics(one), read_metrics(two)
    for key in ("train/loss", "val/acc_clean"):  # noisy accuracies draw per process
        assert by_step(expected, key), key
        assert by_step(got, key) == pytest.approx(by_step(expected, key), rel=1e-4, abs=1e-6), key
    a, b = load(one / "checkpoints" / "last.ckpt"), load(two / "checkpoints" / "last.ckpt")
    for name, value in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][name], value, rtol=1e-4, atol=1e-5)


FINETUNE_CONFIG = """
name: folds
output_dir: {out}
folds: 4
keep_checkpoints: false
model: {{name: caduceus, d_model: 16, n_layer: 1, vocab_size: 12, pad_vocab_size_multiple: 8}}
benchmark: {{root: {root}, tasks: [human_vs_phage], download: false}}
sweep: {{lr: [1.0e-2], batch_size: [32]}}
trainer: {{accelerator: cpu, max_epochs: 1, enable_progress_bar: false, num_sanity_val_steps: 0}}
"""


@pytest.mark.process_level
def test_finetune_spreads_its_folds_over_two_processes_with_the_results_of_one(tmp_path, capsys):
    task_root = ROOT / "tests" / "data" / "genomic_benchmarks"
    results = {}
    for name, devices in (("one", 1), ("two", 2)):
        config = tmp_path / f"{name}.yaml"
        config.write_text(FINETUNE_CONFIG.format(out=tmp_path / name, root=task_root))
        args = ("finetune", str(config), f"trainer.devices={devices}")
        output = in_this_process(capsys, *args) if devices == 1 else command(*args)
        assert output.count("| human_vs_phage") == 1  # the table, printed by rank 0 alone
        for fold in range(4):
            assert output.count(f"/fold{fold} (of fold0..fold3): val acc") == 1  # ran once
        runs = sorted((tmp_path / name / "runs").glob("*/*/fold*/result.json"))
        results[name] = [json.loads(path.read_text()) for path in runs]
        assert not (tmp_path / name / ".lock").exists()
    one, two = results["one"], results["two"]
    assert [r["rank"] for r in one] == [0, 0, 0, 0]
    assert [r["rank"] for r in two] == [0, 1, 0, 1]  # fold k on process k mod 2
    for a, b in zip(one, two, strict=True):
        for key in ("fold", "seed", "val_acc", "test_acc", "test_mcc", "epochs", "n_train"):
            assert a[key] == b[key], key
        assert a["test_loss"] == pytest.approx(b["test_loss"], rel=1e-5)
    one_summary, two_summary = (
        json.loads((tmp_path / name / "results.json").read_text())["summary"]["human_vs_phage"]
        for name in results
    )
    assert two_summary == pytest.approx(one_summary)


RANKS = ("0", "1")  # the local ranks of a two-process run


@pytest.mark.process_level
def test_ctrl_c_of_one_training_process_stops_them_all_after_the_same_step(tmp_path):
    """A Ctrl-C (or a scheduler's signal) the main process alone takes. Was: it stopped after
    its step while the other process waited for it in the next one, for ever; and every
    process printed the line saying where the run stopped. The run is given --threads: each
    of its 2 processes trains on half. Was: Lightning's launch set every process to (cores /
    processes) threads over it, whatever --threads said."""
    notes = tmp_path / "notes"
    notes.mkdir()
    driver = tmp_path / "driver.py"  # each process notes, by local rank, its pid and threads
    driver.write_text(
        "import os, sys, torch\n"
        "from genodiff import cli\n"
        "from genodiff.training.module import GenerativeTrainingModule as Module\n"
        "real = Module.training_step\n"
        "def noting(self, batch, batch_idx):\n"
        f"    note = os.path.join({str(notes)!r}, os.environ.get('LOCAL_RANK', '0'))\n"
        "    with open(note + '.part', 'w') as handle:\n"
        "        handle.write(f'{os.getpid()} {torch.get_num_threads()}')\n"
        "    os.replace(note + '.part', note)  # read whole, whenever it is read\n"
        "    return real(self, batch, batch_idx)\n"
        "Module.training_step = noting\n"
        "sys.exit(cli.main(sys.argv[1:]))\n"
    )
    out = tmp_path / "o"
    long = [o for o in RUN if not o.startswith("trainer.max_steps=")] + ["trainer.max_steps=100000"]
    command = [sys.executable, str(driver), "train", DEMO, *long, *TWO_PROCESSES]
    given, command, env = with_more_threads_than_lightning_gives(command)
    process = subprocess.Popen(
        [*command, f"output_dir={out}"], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 300
        while not all((notes / rank).exists() for rank in RANKS) and process.poll() is None:
            assert time.monotonic() < deadline, "the two processes never trained"
            time.sleep(0.1)
        pids, threads = zip(*((notes / rank).read_text().split() for rank in RANKS), strict=True)
        other = int(pids[1])
        process.send_signal(signal.SIGINT)  # the main process alone
        _, stderr = process.communicate(timeout=180)
        # The other process ends too, on its own (at the latest once it sees the main one gone)
        stop = time.monotonic() + 60
        while running(other) and time.monotonic() < stop:
            time.sleep(0.1)
        other_ended = not running(other)
    finally:  # what is left of a run that hung
        for note in [notes / rank for rank in RANKS if (notes / rank).exists()]:
            if running(pid := int(note.read_text().split()[0])):
                os.kill(pid, signal.SIGKILL)
    assert process.returncode == 128 + signal.SIGINT, stderr[-3000:]
    stopped = [line for line in stderr.splitlines() if line.startswith("genodiff train: stopped")]
    assert len(stopped) == 1 and "stopped by Ctrl-C at step" in stopped[0], stderr[-3000:]
    assert (out / "checkpoints" / "last.ckpt").is_file()
    assert other_ended
    assert list(threads) == [str(given // 2)] * 2
