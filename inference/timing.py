"""Honest clocks: wait for the device to finish before reading the time.

On a GPU, kernels run asynchronously; reading `perf_counter()` right after a call measures
only the launch. `synchronize()` first, then read. On a CPU the sync is a no-op.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

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


def measure_bandwidth(device: torch.device | str, megabytes: int = 256, repeats: int = 5) -> float:
    """Memory bandwidth in GB/s from copying a large buffer: (read + write bytes) / seconds.

    A copy reads N bytes and writes N bytes, so we count 2N. The median of `repeats` runs.
    This is the ceiling that decode runs into: every weight is read once per token.
    """
    n = megabytes * 1024 * 1024 // 4
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)  # warm-up: touch the pages
    times = []
    for _ in range(repeats):
        with stopwatch(device) as t:
            dst.copy_(src)
        times.append(t[0])
    times.sort()
    return 2 * src.numel() * 4 / times[len(times) // 2] / 1e9
