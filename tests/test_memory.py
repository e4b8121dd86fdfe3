"""The host memory genodiff's checks count on (``genodiff.memory``): the machine's physical
memory, or its control group's limit when lower (a container, a SLURM job), read from fake
``/proc/self/cgroup`` and ``/sys/fs/cgroup`` trees."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from genodiff import memory

GIB = 1 << 30


def tree(tmp_path: Path, proc: str, files: dict[str, str]) -> tuple[Path, Path]:
    """A fake /proc/self/cgroup holding ``proc`` and a cgroup root holding ``files``."""
    (tmp_path / "cgroup").write_text(proc)
    for name, text in files.items():
        path = tmp_path / "root" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "cgroup", tmp_path / "root"


def test_a_v1_job_s_limit_is_read_from_its_group_and_those_above_it(tmp_path):
    proc, root = tree(
        tmp_path,
        "4:memory:/slurm/job_7/step_0\n1:cpu:/\n",
        {
            "memory/slurm/job_7/step_0/memory.limit_in_bytes": "9223372036854771712\n",
            "memory/slurm/job_7/memory.limit_in_bytes": f"{4 * GIB}\n",  # the job's
            "memory/memory.limit_in_bytes": "9223372036854771712\n",
        },
    )
    assert min(memory.cgroup_limits(proc, root)) == 4 * GIB


def test_a_v2_limit_above_a_group_that_says_max(tmp_path):
    proc, root = tree(
        tmp_path,
        "0::/user.slice/job\n",
        {"user.slice/job/memory.max": "max\n", "user.slice/memory.max": f"{2 * GIB}\n"},
    )
    assert memory.cgroup_limits(proc, root) == [2 * GIB]


def test_a_container_sees_its_own_group_as_the_root(tmp_path):
    # /proc names the host's path, which the container's /sys/fs/cgroup does not hold
    proc, root = tree(tmp_path, "0::/docker/abc123\n", {"memory.max": f"{3 * GIB}\n"})
    assert memory.cgroup_limits(proc, root) == [3 * GIB]


def test_no_cgroup_files_is_no_limit(tmp_path):
    assert memory.cgroup_limits(tmp_path / "none", tmp_path) == []
    proc, root = tree(tmp_path, "garbage without colons\n0::/\n", {"memory.max": "12x\n"})
    assert memory.cgroup_limits(proc, root) == []


def test_the_host_memory_checks_count_on_is_the_lower_of_the_two(tmp_path, monkeypatch):
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    proc, root = tree(tmp_path, "0::/job\n", {"job/memory.max": f"{physical // 4}\n"})
    monkeypatch.setattr(memory, "PROC_CGROUP", proc)
    monkeypatch.setattr(memory, "CGROUP_ROOT", root)
    # was the machine's physical memory: a job given a quarter of it was checked against all
    assert memory.memory_available(torch.device("cpu")) == (physical // 4, physical // 4)
    (root / "job" / "memory.max").write_text(f"{physical * 2}\n")  # above the machine's
    assert memory.host_memory() == physical
