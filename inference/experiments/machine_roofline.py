"""'This machine', measured: the read bandwidth and the batch-1 decode speed under it (the
roofline), the matmul GFLOP/s and the passes placed under both roofs, and what bounds one
decode step. Every figure is measured here, on the loaded model, with device-synced timing.

`measure_roofline`, `measure_compute_roof` and `measure_step_bound` are what the lesson, the
presenter and the bench call; the shared `shared` results keep the machine's one bandwidth and
GFLOP/s figure per process.
"""
from __future__ import annotations

import statistics

from ..generation import stream
from ..tokens import prompt_ids
from . import step_bound
from .compute_roof import (
    ComputeRoof,
    WorkPoint,
    batch_work_points,
    forward_flops,
    machine_gflops,
    prefill_flops,
)
from .roofline import Roofline, machine_bandwidth
from .step_bound import StepBound

ROOFLINE_PROMPT = "Write a short story about a lighthouse keeper and a storm."
ROOFLINE_NEW_TOKENS = 24  # enough decode steps for a steady median
PREFILL_TOKENS = 256  # a long prompt: intensity ~256× decode's, right of most machines' ridge


def measure_roofline(lm, new_tokens: int = ROOFLINE_NEW_TOKENS, shared=None) -> Roofline:
    """Measured read bandwidth (the machine's one figure, kept in `shared`) and batch-1 decode
    speed, with the bytes one step reads."""
    bandwidth = machine_bandwidth(shared, lm.device)
    ids = prompt_ids(lm.tokenizer, ROOFLINE_PROMPT)
    events = list(stream(lm, ids, max_new_tokens=new_tokens))[1:]  # decode steps only
    rate = 1 / statistics.median(e.seconds for e in events)
    cache = statistics.mean(e.cache_bytes for e in events)
    return Roofline(bandwidth_gbs=bandwidth, bytes_per_token=int(lm.info.weight_bytes + cache),
                    measured_tokens_per_s=rate)


def measure_compute_roof(lm, r: Roofline, shared=None, new_tokens: int = ROOFLINE_NEW_TOKENS,
                         batch_points=()) -> ComputeRoof:
    """The second roof and the passes under it: the machine's matmul GFLOP/s (shared like the
    bandwidth), `r`'s decode step, a prefill of `PREFILL_TOKENS` (median of 3), and the batch
    sweep's steps (`batch_points`, its `BatchPoint`s) when a sweep has run on this machine."""
    info = lm.info
    peak = machine_gflops(shared, lm.device, lm.model.dtype)
    prompt = prompt_ids(lm.tokenizer, ROOFLINE_PROMPT)
    decode = WorkPoint("decode, batch 1", forward_flops(info, 1, len(prompt) + new_tokens / 2),
                       r.bytes_per_token, 1 / r.measured_tokens_per_s)
    ids = (prompt * (PREFILL_TOKENS // len(prompt) + 1))[:PREFILL_TOKENS]
    firsts = [next(iter(stream(lm, ids, max_new_tokens=1))) for _ in range(3)]
    first = sorted(firsts, key=lambda e: e.forward_seconds)[1]  # the median run
    prefill = WorkPoint(f"prefill, {len(ids)} tokens", prefill_flops(info, len(ids)),
                        info.weight_bytes + first.cache_bytes, first.forward_seconds)
    batch = [p for p in batch_work_points(info, batch_points)
             if not p.label.endswith("batch 1")]
    return ComputeRoof(peak, r.bandwidth_gbs, (decode, *batch, prefill))


def measure_step_bound(lm) -> StepBound:
    """What bounds a decode step of the roofline's prompt (the race only on a GPU)."""
    return step_bound.measure_step_bound(lm, prompt_ids(lm.tokenizer, ROOFLINE_PROMPT))
