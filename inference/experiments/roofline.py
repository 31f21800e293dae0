"""Why decode speed has a ceiling: every step reads every weight (plus the KV cache) once.

    decode tokens/s ≤ memory bandwidth (bytes/s) ÷ bytes read per token

With batch B, one pass over the weights serves B tokens, so the ceiling on *aggregate*
tokens/s rises about B-fold until the arithmetic, not the memory, becomes the limit.
`measure_read_bandwidth` streams a buffer much larger than the CPU caches and counts
only the bytes read (a sum reads each byte once and writes almost nothing), which is
the traffic pattern of a decode step.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..timing import stopwatch
from . import sanity
from .shared_results import once


def ceiling_tokens_per_s(bandwidth_gbs: float, bytes_per_token: float) -> float:
    """The bandwidth roof: tokens/s if a step did nothing but read `bytes_per_token`."""
    return bandwidth_gbs * 1e9 / bytes_per_token if bytes_per_token > 0 else 0.0


@dataclass(frozen=True)
class Roofline:
    bandwidth_gbs: float  # measured, bytes read per second / 1e9
    bytes_per_token: int  # weights + KV cache read for one decode step at batch 1
    measured_tokens_per_s: float | None = None

    @property
    def ceiling_tokens_per_s(self) -> float:
        return ceiling_tokens_per_s(self.bandwidth_gbs, self.bytes_per_token)

    @property
    def fraction(self) -> float | None:
        if self.measured_tokens_per_s is None:
            return None
        return self.measured_tokens_per_s / self.ceiling_tokens_per_s

    @property
    def impossible(self) -> str | None:
        """Why the measured speed cannot be right against the ceiling (None: it can)."""
        if self.measured_tokens_per_s is None:
            return None
        return sanity.bandwidth(self.measured_tokens_per_s, self.ceiling_tokens_per_s)


def measure_read_bandwidth(device: torch.device | str, megabytes: int = 512,
                           repeats: int = 5) -> float:
    """GB/s of reading a `megabytes` float32 buffer (median of `repeats` sums)."""
    x = torch.ones(megabytes * 1024 * 1024 // 4, dtype=torch.float32, device=device)
    x.sum()  # warm-up
    times = []
    for _ in range(repeats):
        with stopwatch(device) as t:
            x.sum()
        times.append(t[0])
    times.sort()
    return x.numel() * 4 / times[len(times) // 2] / 1e9


def machine_bandwidth(shared, device: torch.device | str) -> float:
    """This machine's one read-bandwidth figure: measured once per process and device, then
    shared (a `SharedResults`) by every lesson, so the screen never shows two numbers for one
    machine. Without `shared`, a fresh measurement."""
    return once(shared, ("read-bandwidth", str(device)), lambda: measure_read_bandwidth(device))
