"""The second roof: how fast this machine does arithmetic. A forward pass is limited by
whichever runs out first, reading bytes (the bandwidth roof) or multiplying (the compute roof):

    attainable FLOP/s = min(peak FLOP/s, bandwidth × arithmetic intensity)

where arithmetic intensity = FLOPs done ÷ bytes read. The two roofs meet at the ridge point,
peak FLOP/s ÷ bandwidth. Left of it a pass waits for memory, right of it for arithmetic.

Decode at batch 1 does about 2 FLOPs per weight (a multiply and an add) and reads every weight
once: its intensity is about 2 ÷ bytes per weight (0.5 in float32), far left of the ridge. A
prefill of n tokens reads the weights once for n tokens, and a decode step at batch B once for
B rows: their intensity is about n (or B) times higher, so they climb the bandwidth roof until
they reach the ridge. Past it, more rows cost proportionally more time: that is why batch 64
does not give 64 times the tokens/s of batch 1.

FLOP counts here are theoretical (the formula in `forward_flops`); times are measured.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from ..timing import stopwatch
from .shared_results import once


def measure_matmul_gflops(device: torch.device | str, dtype: torch.dtype = torch.float32,
                          size: int = 1024, repeats: int = 5) -> float:
    """GFLOP/s of one `size`×`size` by `size`×`size` matrix product in `dtype` (2·size³ FLOPs,
    median of `repeats`, the device synced around each): the machine's compute roof as a
    well-tuned kernel reaches it, the same kind of work as the model's linear layers."""
    a = torch.randn(size, size, device=device).to(dtype)  # [size, size]
    b = torch.randn(size, size, device=device).to(dtype)  # [size, size]
    a @ b  # warm-up: kernel choice, caches
    times = []
    for _ in range(repeats):
        with stopwatch(device) as t:
            a @ b
        times.append(t[0])
    return 2 * size**3 / statistics.median(times) / 1e9


def machine_gflops(shared, device: torch.device | str, dtype: torch.dtype) -> float:
    """This machine's one compute-roof figure for `dtype`: measured once, then shared (a
    `SharedResults`) like the bandwidth. Without `shared`, a fresh measurement."""
    return once(shared, ("matmul-gflops", str(device), str(dtype)),
                lambda: measure_matmul_gflops(device, dtype))


def forward_flops(info, tokens: int, context: float) -> float:
    """Theoretical FLOPs of one forward pass: `tokens` new tokens (a prefill's prompt, or one
    per row of a decode batch), each attending to `context` positions on average.

    Linear layers: 2 FLOPs per weight per token (the tied embedding counted once, as the output
    head's matmul). Attention: scores and the weighted sum, 2 × 2 × hidden per position per
    layer. Norms, activations and softmax are left out (well under 1%)."""
    linear = 2 * info.parameters * tokens
    attention = 4 * info.layers * info.heads * info.head_dim * tokens * context
    return float(linear + attention)


@dataclass(frozen=True)
class WorkPoint:
    """One measured forward pass placed on the roofline."""

    label: str  # "decode, batch 1", "prefill, 256 tokens"
    flops: float  # theoretical, `forward_flops`
    bytes_read: float  # weights + KV cache read by the pass
    seconds: float  # measured, synced

    @property
    def intensity(self) -> float:
        """FLOPs per byte read."""
        return self.flops / self.bytes_read

    @property
    def gflops(self) -> float:
        """Achieved GFLOP/s: the theoretical FLOPs over the measured time."""
        return self.flops / self.seconds / 1e9


@dataclass(frozen=True)
class ComputeRoof:
    peak_gflops: float  # measured matmul
    bandwidth_gbs: float  # measured read bandwidth
    points: tuple[WorkPoint, ...]

    @property
    def ridge(self) -> float:
        """FLOPs per byte where the roofs meet: left of it memory limits, right of it arithmetic."""
        return self.peak_gflops / self.bandwidth_gbs

    def attainable_gflops(self, intensity: float) -> float:
        return min(self.peak_gflops, self.bandwidth_gbs * intensity)

    def bound(self, point: WorkPoint) -> str:
        return "memory" if point.intensity < self.ridge else "compute"


def batch_work_points(info, points) -> list[WorkPoint]:
    """The batch sweep's measured steps (`BatchPoint`s) as roofline points: B tokens a step,
    each attending to about the prompt plus half the decoded tokens."""
    return [WorkPoint(f"decode, batch {p.batch}", forward_flops(info, p.batch, p.mean_context),
                      p.weight_bytes + p.cache_bytes, p.step_seconds) for p in points]
