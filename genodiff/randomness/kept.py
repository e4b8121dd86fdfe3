"""The caller's global random state, left as it was by a library call that draws from it.

Building a module draws its initial weights from torch's global generator, even where the
weights are then read from a file; a loader that did so would advance the caller's generator,
and a session seeded with ``torch.manual_seed`` would draw other numbers after a
``genodiff.load`` than without it. ``global_random_state_kept`` lets the block draw as before
(the same numbers, so what it builds is what it built before) and puts back, at its end, the
state of torch's CPU generator, of every CUDA device's generator once CUDA is initialised, of
Python's ``random`` and of NumPy's global generator.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch


@contextmanager
def global_random_state_kept() -> Iterator[None]:
    """The block, with the global random states restored at its end (module doc); also a
    decorator (``@global_random_state_kept()``)."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    # Reading a device's state initialises CUDA: only where it is already (before, no device
    # generator has a state of its own to keep), and then every device's.
    cuda_devices = range(torch.cuda.device_count()) if torch.cuda.is_initialized() else []
    try:
        with torch.random.fork_rng(devices=cuda_devices):
            yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
