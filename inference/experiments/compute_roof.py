"""The second roof: how fast this machine does arithmetic. A forward pass is limited by
whichever runs out first, reading bytes (the bandwidth roof) or multiplying (the compute roof):

    attainable FLOP/s = min(peak FLOP/s, bandwidth × arithmetic intensity)

where arithmetic intensity = FLOPs done ÷ bytes read. The two roofs meet at the ridge point,
peak FLOP/s ÷ bandwidth. Left of it the best a pass can do is the bandwidth roof, right of it
the compute roof; whether it gets there is measured, not assumed (`bound_rule.decide_bound`
reads each pass's share of both roofs: a small model's decode step on a GPU sits left of the
ridge yet reaches a few percent of the bandwidth roof, bound by launching kernels).

Decode at batch 1 does about 2 FLOPs per weight (a multiply and an add) and reads every weight
once: its intensity is about 2 ÷ bytes per weight (0.5 in float32), far left of the ridge. A
prefill of n tokens reads the weights once for n tokens, and a decode step at batch B once for
B rows: their intensity is about n (or B) times higher, so their ceiling climbs the bandwidth
roof until it reaches the ridge. Past it, more rows cost proportionally more time: one reason
batch 64 does not give 64 times the tokens/s of batch 1 (the measured sweep shows the rest).

FLOP counts here are theoretical (the formula in `forward_flops`); times are measured.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from ..timing import stopwatch
from .bound_rule import BoundVerdict, decide_bound, step_shares
from .shared_results import once


def measure_matmul_gflops(device: torch.device | str, dtype: torch.dtype = torch.float32,
                          size: int | None = None, repeats: int = 5,
                          inner: int | None = None) -> float:
    """GFLOP/s of `inner` back-to-back `size`×`size` by `size`×`size` matrix products in
    `dtype` (2·size³ FLOPs each, median of `repeats`, the device synced around each run): the
    machine's compute roof as a well-tuned kernel reaches it, the same kind of work as the
    model's linear layers. A GPU does one 1024³ product in microseconds, about one kernel
    launch, so there the default is a sustained run (4096³, 20 in a row); a CPU's 1024³ product
    already takes milliseconds."""
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
    """This machine's one compute-roof figure for `dtype`: measured once, then shared (a
    `SharedResults`) like the bandwidth. Without `shared`, a fresh measurement."""
    return once(shared, ("matmul-gflops", str(device), str(dtype)),
                lambda: measure_matmul_gflops(device, dtype))


def forward_flops(info, tokens: int, context: float, logits_tokens: int | None = None) -> float:
    """Theoretical FLOPs of one forward pass: `tokens` new tokens (a prefill's prompt, or one
    per row of a decode batch), each attending to `context` positions on average, with the
    output head run for `logits_tokens` of them (default: all; a prefill keeps the logits of
    its last position only, `logits_tokens=1`, as `engine.prefill` does).

    Linear layers: 2 FLOPs per weight per token; the tied embedding is counted once, as the
    output head's matmul (vocab × hidden weights), for the positions whose logits are computed.
    Attention: scores and the weighted sum, 2 × 2 × hidden per position per layer. Norms,
    activations and softmax are left out (well under 1%).

    >>> from types import SimpleNamespace
    >>> info = SimpleNamespace(parameters=100, vocab_size=5, hidden_size=4, layers=1, heads=1,
    ...                        head_dim=1)
    >>> forward_flops(info, tokens=3, context=0, logits_tokens=1)  # 2·80·3 + 2·20·1
    520.0
    """
    head = info.vocab_size * info.hidden_size  # the output head's weights (tied embedding)
    kept = tokens if logits_tokens is None else logits_tokens
    linear = 2 * (info.parameters - head) * tokens + 2 * head * kept
    attention = 4 * info.layers * info.heads * info.head_dim * tokens * context
    return float(linear + attention)


def prefill_flops(info, prompt_tokens: int) -> float:
    """A prefill of `prompt_tokens`: every position through every layer, attending to half
    the prompt on average (causal), the output head for the last position only."""
    return forward_flops(info, prompt_tokens, prompt_tokens / 2, logits_tokens=1)


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

    def verdict(self, point: WorkPoint, device: str = "cpu") -> BoundVerdict:
        """What bounded this pass, from its measured shares of both roofs (`bound_rule`)."""
        memory, compute = step_shares(point.flops, point.bytes_read, point.seconds,
                                      self.peak_gflops, self.bandwidth_gbs)
        return decide_bound(memory, compute, device=device)

    def bound(self, point: WorkPoint) -> str:
        """The verdict's kind: "memory", "compute" or "neither" (no step split here)."""
        return self.verdict(point).kind


def batch_work_points(info, points) -> list[WorkPoint]:
    """The batch sweep's measured steps (`BatchPoint`s) as roofline points: B tokens a step,
    each attending to about the prompt plus half the decoded tokens."""
    return [WorkPoint(f"decode, batch {p.batch}", forward_flops(info, p.batch, p.mean_context),
                      p.weight_bytes + p.cache_bytes, p.step_seconds) for p in points]
