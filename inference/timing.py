"""Honest clocks: wait for the device to finish before reading the time.

On a GPU, kernels run asynchronously; reading `perf_counter()` right after a call measures
only the launch. `synchronize()` first, then read. On a CPU the sync is a no-op.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch


def sync(device: torch.device | str) -> None:
    """Block until all queued work on `device` is done."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


@contextmanager
def stopwatch(device: torch.device | str) -> Iterator[list[float]]:
    """`with stopwatch(dev) as t: ...` then `t[0]` holds the synced seconds."""
    result = [0.0]
    sync(device)
    start = time.perf_counter()
    try:
        yield result
    finally:
        sync(device)
        result[0] = time.perf_counter() - start
