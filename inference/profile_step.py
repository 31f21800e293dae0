"""What bounds one decode step here: the big matrix products, or everything around them?

The roofline says a decode step must at least read every weight once, yet measured steps sit
below that ceiling, and the profiler says why: one step dispatches thousands of small operations
(norms, rotary embeddings, reshapes, casts), each costing a fixed few microseconds.
`profile_decode_step` runs real decode steps under `torch.profiler`: operations per step and the
time inside the big matrix products, inside every other operation, and left over (Python); on
a GPU also kernels per step and the share the GPU was busy. `tiny_op_seconds` measures one
do-nothing operation, so ops per step × that cost is a step's dispatch bill.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch
from torch.profiler import ProfilerActivity, profile

from .engine import decode_step, prefill
from .timing import stopwatch

# The big matrix products: every Linear (q/k/v/o, gate/up/down) and the output head.
MATMUL_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::mkldnn_linear",
                        "aten::_weight_int8pack_mm",
                        "aten::_weight_int4pack_mm", "aten::_weight_int4pack_mm_for_cpu"})


@dataclass(frozen=True)
class StepProfile:
    device: str  # "cpu" or "cuda:0"
    steps: int  # decode steps profiled
    step_seconds: float  # median wall time of one step, without the profiler
    ops_per_step: float  # aten operations dispatched per step (nested ones counted too)
    matmul_seconds: float  # per step, time inside the big matrix products (MATMUL_OPS); on a
    # CPU their share of a profiled step, applied to `step_seconds`
    overhead_share: float  # 0..1: share of the step outside the big matrix products
    matmul_ops_per_step: float = 0.0  # how many of `ops_per_step` are big matrix products
    other_ops_seconds: float = 0.0  # per step, self time of every other operation (CPU) or
    # kernel (GPU), profiled; capped so that matmuls + other ops never exceed the step
    kernels_per_step: float | None = None  # GPU kernels launched per step (CUDA only)
    device_busy_share: float | None = None  # 0..1: share of the step the GPU ran kernels

    @property
    def matmul_share(self) -> float:
        return 1.0 - self.overhead_share

    @property
    def between_ops_seconds(self) -> float:
        """Per step, the time inside no operation: Python and framework code between them (on
        a GPU: the time the GPU sat idle, waiting for the next launch)."""
        return max(0.0, self.step_seconds - self.matmul_seconds - self.other_ops_seconds)


def _timed_steps(model, token: torch.Tensor, cache, n: int) -> tuple[list[float], torch.Tensor]:
    times = []
    for _ in range(n):
        with stopwatch(token.device) as t:
            token = decode_step(model, token, cache).argmax(-1)  # [1]
        times.append(t[0])
    return times, token


def _device_time_us(event) -> float:
    """A kernel event's device time in µs, across profiler versions."""
    for name in ("device_time", "cuda_time", "device_time_total", "cuda_time_total"):
        value = getattr(event, name, None)
        if value:
            return float(value)
    return 0.0


def profile_decode_step(model, prompt_ids: list[int], steps: int = 4) -> StepProfile:
    """Profile `steps` greedy decode steps after a prefill of `prompt_ids` (batch 1).

    Example on the 2-core CI CPU (float32): ~2,000 ops a step, ~0.4 of it outside the matmuls.
    """
    device = next(model.parameters()).device
    pre = prefill(model, torch.tensor([prompt_ids], device=device))
    token = pre.logits.argmax(-1)  # [1]
    times, token = _timed_steps(model, token, pre.cache, steps + 1)  # first one is warm-up
    step_s = statistics.median(times[1:])
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        profiled, _ = _timed_steps(model, token, pre.cache, steps)
    events = prof.events()
    on_gpu = [getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA for e in events]
    cpu_ops = [e for e, g in zip(events, on_gpu) if e.name.startswith("aten::") and not g]
    matmuls = [e for e in cpu_ops if e.name in MATMUL_OPS]
    matmul_us = sum(e.self_cpu_time_total for e in matmuls)
    other_us = sum(e.self_cpu_time_total for e in cpu_ops) - matmul_us
    # On a CPU the profiler adds a little to every operation, and the profiled steps may share
    # the cores with other work: its split is read as shares of the profiled step and applied
    # to the step timed without it (else the parts could exceed the step and leave "0 ms").
    scale = step_s / statistics.median(profiled)
    kernels = busy = None
    if cuda:
        gpu = [e for e, g in zip(events, on_gpu) if g]
        kernels = len(gpu) / steps
        kernel_us = sum(_device_time_us(e) for e in gpu)
        busy = min(1.0, kernel_us / 1e6 / steps / step_s)
        matmul_us = sum(_device_time_us(e) for e in gpu
                        if any(k in e.name.lower() for k in ("gemm", "gemv", "matmul", "int4")))
        other_us = kernel_us - matmul_us  # on a GPU: the step's other kernels, device time
        scale = 1.0  # kernels' device time is not slowed by the profiler's bookkeeping
    matmul_s = min(step_s, matmul_us / 1e6 / steps * scale)
    other_s = min(step_s - matmul_s, other_us / 1e6 / steps * scale)
    return StepProfile(device=str(device), steps=steps, step_seconds=step_s,
                       ops_per_step=len(cpu_ops) / steps, matmul_seconds=matmul_s,
                       overhead_share=min(1.0, max(0.0, 1.0 - matmul_s / step_s)),
                       matmul_ops_per_step=len(matmuls) / steps, other_ops_seconds=other_s,
                       kernels_per_step=kernels, device_busy_share=busy)


def tiny_op_seconds(device: torch.device | str, n: int = 2000, repeats: int = 5) -> float:
    """The fixed cost of one operation that does almost nothing (adding two one-element
    tensors), median of `repeats` runs of `n`, synced: what every one of a step's operations
    pays on top of its arithmetic."""
    a = torch.ones(1, device=device)
    times = []
    for _ in range(repeats):
        with stopwatch(device) as t:
            for _ in range(n):
                torch.add(a, a)
        times.append(t[0] / n)
    return statistics.median(times)
