"""Fine-tuning runs spread over processes: with ``trainer.devices`` (times
``trainer.num_nodes``) above 1, ``genodiff finetune`` starts that many processes through
Lightning's launcher (Fabric's DDP strategy: the command runs again once per extra local
process; under SLURM or torchrun the processes exist already) and gives each one every
``world_size``-th run of the (task, sweep point, fold) grid. A run trains on one device, from
the same seed and data as it would in one process, so the results are those of one process;
the folds of a task just run side by side.

Inside a worker each run's Trainer is a world of one process: Lightning's rank-zero guard
(which keeps loggers and messages to rank 0 of a DDP run) is set to this process, so every
run writes its own logs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lightning.fabric import Fabric
from lightning.fabric.utilities.rank_zero import rank_zero_only as fabric_rank_zero
from lightning.pytorch.utilities.rank_zero import rank_zero_only as trainer_rank_zero

GPU_ACCELERATORS = ("gpu", "cuda")


@dataclass
class Workers:
    """This process's share of the runs: ``rank`` of ``world_size`` processes, on the
    ``local_rank``-th device of its node; ``fabric`` holds the process group (None for one
    process)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    fabric: Fabric | None = None

    def takes(self, index: int) -> bool:
        """Whether run ``index`` of the grid (in the grid's fixed order) is this process's."""
        return index % self.world_size == self.rank

    def wait_for_all(self) -> None:
        """Return once every process has finished its runs."""
        if self.fabric is not None:
            self.fabric.barrier()

    def run_trainer_kwargs(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The Trainer settings of one run: ``kwargs`` (the ``trainer`` section) as they are in
        one process; with several, one device per run (this process's) and no strategy."""
        kwargs = dict(kwargs)
        if self.world_size == 1:
            return kwargs
        on_gpu = kwargs.get("accelerator", "auto") in GPU_ACCELERATORS
        kwargs.update(devices=[self.local_rank] if on_gpu else 1, num_nodes=1, strategy="auto")
        return kwargs


def launch_workers(trainer: Mapping[str, Any]) -> Workers:
    """The processes the ``trainer`` section asks for (``accelerator``, ``devices``,
    ``num_nodes``), started and joined in one process group; one process: no launch."""
    fabric = Fabric(
        accelerator=trainer.get("accelerator", "auto"),
        devices=trainer.get("devices", "auto"),
        num_nodes=trainer.get("num_nodes", 1),
        strategy="ddp",
    )
    if fabric.world_size == 1:
        return Workers()
    fabric.launch()  # the other local processes run the same command up to here
    for guard in (trainer_rank_zero, fabric_rank_zero):
        guard.rank = 0  # each run is a world of one: its logs are written by this process
    return Workers(fabric.global_rank, fabric.world_size, fabric.local_rank, fabric)
