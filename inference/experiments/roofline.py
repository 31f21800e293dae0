"""The two roofs of this machine, and the one rule that says which bound a step.

    decode tokens/s  ≤ memory bandwidth ÷ bytes read per token           (the bandwidth roof)
    attainable FLOP/s = min(peak FLOP/s, bandwidth × arithmetic intensity) (the compute roof)

At batch B one read of the weights serves B tokens, so the ceiling rises about B-fold until the
arithmetic limits it. Intensity says which roof a pass *could* reach first, not which it did:
`decide_bound` reads the step's measured share of each roof, and claims no unmeasured cause.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from ..timing import stopwatch
from . import robust
from .shared_results import once

ROOF_SHARE = 0.5  # reaching at least half of a roof: that roof bounds the step
OVERHEAD_SHARE = 0.4  # with neither roof reached, an overhead share this large is the bound


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
        measured = self.measured_tokens_per_s
        return None if measured is None else measured / self.ceiling_tokens_per_s

    @property
    def impossible(self) -> str | None:
        """Why the measured speed cannot be right against the ceiling (None: it can, or none)."""
        return robust.bandwidth(self.measured_tokens_per_s or 0.0, self.ceiling_tokens_per_s)


def measure_read_bandwidth(device: torch.device | str) -> float:
    """GB/s of reading a 512 MiB float32 buffer (median of 5 sums)."""
    x = torch.ones(512 * 1024 * 1024 // 4, dtype=torch.float32, device=device)
    x.sum()  # warm-up
    times = []
    for _ in range(5):
        with stopwatch(device) as t:
            x.sum()
        times.append(t[0])
    return x.numel() * 4 / statistics.median(times) / 1e9


def machine_bandwidth(shared, device: torch.device | str) -> float:
    """This machine's one read-bandwidth figure, measured once and shared by every lesson."""
    return once(shared, ("read-bandwidth", str(device)), lambda: measure_read_bandwidth(device))


def measure_matmul_gflops(device: torch.device | str, dtype: torch.dtype = torch.float32,
                          size: int | None = None, repeats: int = 5,
                          inner: int | None = None) -> float:
    """GFLOP/s of `inner` back-to-back `size`³ matrix products (median of `repeats`). On a GPU
    one 1024³ product lasts about a kernel launch, so the default there is 20 of 4096³."""
    gpu = torch.device(device).type == "cuda"
    size, inner = size or (4096 if gpu else 1024), inner or (20 if gpu else 1)
    a = torch.randn(size, size, device=device).to(dtype)  # [size, size]
    b = torch.randn(size, size, device=device).to(dtype)  # [size, size]
    a @ b  # warm-up: kernel choice, caches
    times = []
    for _ in range(repeats):
        with stopwatch(device) as t:
            for _ in range(inner):
                a @ b
        times.append(t[0])
    return 2 * size**3 * inner / statistics.median(times) / 1e9


def machine_gflops(shared, device: torch.device | str, dtype: torch.dtype) -> float:
    """This machine's one compute-roof figure for `dtype`, shared like the bandwidth."""
    return once(shared, ("matmul-gflops", str(device), str(dtype)),
                lambda: measure_matmul_gflops(device, dtype))


def forward_flops(info, tokens: int, context: float, logits_tokens: int | None = None) -> float:
    """Theoretical FLOPs of one pass: `tokens` new tokens each attending to `context` positions
    on average, the output head run for `logits_tokens` of them (default: all). Linear layers:
    2 per weight per token (the tied embedding once, as the head); attention: 4 × hidden per
    position per layer; norms, activations and softmax left out (under 1%)."""
    head = info.vocab_size * info.hidden_size  # the output head's weights (tied embedding)
    kept = tokens if logits_tokens is None else logits_tokens
    linear = 2 * (info.parameters - head) * tokens + 2 * head * kept
    attention = 4 * info.layers * info.heads * info.head_dim * tokens * context
    return float(linear + attention)


def prefill_flops(info, prompt_tokens: int) -> float:
    """A causal prefill: on average half the prompt attended to; logits for the last only."""
    return forward_flops(info, prompt_tokens, prompt_tokens / 2, logits_tokens=1)


@dataclass(frozen=True)
class WorkPoint:
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
        """Achieved: theoretical FLOPs over the measured time."""
        return self.flops / self.seconds / 1e9


@dataclass(frozen=True)
class BoundVerdict:
    kind: str  # "memory", "compute", "dispatch", "launches" or "neither"
    label: str  # the table's word: "memory", "arithmetic", "dispatch", "kernel launches", ...
    sentence: str  # the one sentence every view prints for this verdict


def decide_bound(memory_share: float, compute_share: float | None,
                 overhead_share: float | None = None, device: str = "cpu") -> BoundVerdict:
    """The bound of one step from its shares of each roof (None: not measured) and of time
    outside the real work (dispatch on "cpu", kernel launches on "cuda")."""
    mem = max(memory_share, 0.0)
    comp = max(compute_share, 0.0) if compute_share is not None else 0.0
    shares = (f"{mem:.0%} of the measured bandwidth and {comp:.0%} of the measured matmul peak"
              if compute_share is not None else f"{mem:.0%} of the measured bandwidth")
    if max(mem, comp) >= ROOF_SHARE:
        if mem >= comp:
            return BoundVerdict("memory", "memory", f"Bound by memory: it read at {shares}.")
        return BoundVerdict("compute", "arithmetic", f"Bound by arithmetic: it reached {shares}.")
    gpu = str(device).startswith("cuda")
    if overhead_share is not None and overhead_share >= OVERHEAD_SHARE:
        kind, label = ("launches", "kernel launches") if gpu else ("dispatch", "dispatch")
        # on a CPU the time outside the matrix products is also real work (attention, copies,
        # norms): it bounds dispatch from above, and the sentence says so
        what = ("kernel launches", "to the GPU waiting between kernel launches") if gpu else (
            "small operations", "outside the matrix products, to thousands of small operations "
            "(attention, copies, norms) and starting each one (dispatch: at most that share)")
        return BoundVerdict(kind, label, f"Bound by {what[0]}, not by either roof: it reached "
                            f"only {shares}, and {overhead_share:.0%} of the step went {what[1]}.")
    tail = (f" The step split measured {overhead_share:.0%} of it outside the real work."
            if overhead_share is not None else
            " What fills the rest is not measured here (see the step split on This machine).")
    return BoundVerdict("neither", "neither roof",
                        f"Neither roof bounds it: it reached only {shares}.{tail}")


def step_shares(flops: float, bytes_read: float, seconds: float, peak_gflops: float,
                bandwidth_gbs: float) -> tuple[float, float]:
    """(memory share, compute share) of one step against the two measured roofs."""
    if seconds <= 0:
        return 0.0, 0.0
    memory = bytes_read / seconds / (bandwidth_gbs * 1e9) if bandwidth_gbs > 0 else 0.0
    compute = flops / seconds / (peak_gflops * 1e9) if peak_gflops > 0 else 0.0
    return memory, compute


@dataclass(frozen=True)
class ComputeRoof:
    peak_gflops: float  # measured matmul
    bandwidth_gbs: float  # measured read bandwidth
    points: tuple[WorkPoint, ...]

    @property
    def ridge(self) -> float:
        """FLOPs per byte where the roofs meet."""
        return self.peak_gflops / self.bandwidth_gbs

    def attainable_gflops(self, intensity: float) -> float:
        return min(self.peak_gflops, self.bandwidth_gbs * intensity)

    def verdict(self, point: WorkPoint, device: str = "cpu") -> BoundVerdict:
        memory, compute = step_shares(point.flops, point.bytes_read, point.seconds,
                                      self.peak_gflops, self.bandwidth_gbs)
        return decide_bound(memory, compute, device=device)


def batch_work_points(info, points) -> list[WorkPoint]:
    """The batch sweep's `BatchPoint`s as roofline points: B tokens a step."""
    return [WorkPoint(f"decode, batch {p.batch}", forward_flops(info, p.batch, p.mean_context),
                      p.weight_bytes + p.cache_bytes, p.step_seconds) for p in points]
