"""'This machine', measured on the loaded model: the read bandwidth and the batch-1 decode
speed under it (the roofline), the matmul GFLOP/s with the passes under both roofs, and what
bounds one decode step. A speed past the bandwidth ceiling is measured once more, the bandwidth
read again first (another program only lowers it, so the higher counts).
"""
from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass

from ..generation import stream
from ..tokens import prompt_ids
from . import noise, roofline, step_bound
from .noise import Noise
from .quality import greedy_tokens
from .roofline import ComputeRoof, Roofline, WorkPoint, measure_read_bandwidth
from .step_bound import StepBound

ROOFLINE_PROMPT = "Write a short story about a lighthouse keeper and a storm."
ROOFLINE_NEW_TOKENS = 24  # enough decode steps for a steady median
PREFILL_TOKENS = 256  # a long prompt: intensity ~256× decode's, right of most machines' ridge


@dataclass(frozen=True)
class RooflineProgress:
    steps: int  # decode steps timed so far (the prefill is not one)
    total: int  # decode steps asked for (fewer if the answer ends first)
    bandwidth_gbs: float  # measured read bandwidth (the machine's one figure)
    tokens_per_s: float | None  # 1 ÷ median step so far (None before the first step)
    roofline: Roofline | None = None  # set on the last update only
    step_seconds: tuple[float, ...] = ()  # every decode step's time (last update only)


def roofline_steps(lm, new_tokens: int = ROOFLINE_NEW_TOKENS, shared=None,
                   bandwidth_gbs: float | None = None) -> Iterator[RooflineProgress]:
    """An update after each timed decode step, then the roofline."""
    bandwidth = bandwidth_gbs or roofline.machine_bandwidth(shared, lm.device)
    ids = prompt_ids(lm.tokenizer, ROOFLINE_PROMPT)
    total = max(new_tokens - 1, 1)
    yield RooflineProgress(0, total, bandwidth, None)
    events = []
    for e in stream(lm, ids, max_new_tokens=new_tokens):
        if e.index == 0:  # the prefill: not a decode step
            continue
        events.append(e)
        yield RooflineProgress(len(events), total, bandwidth,
                               1 / statistics.median(ev.seconds for ev in events))
    rate = 1 / statistics.median(e.seconds for e in events)
    cache = statistics.mean(e.cache_bytes for e in events)
    yield RooflineProgress(len(events), total, bandwidth, rate,
                           Roofline(bandwidth_gbs=bandwidth,
                                    bytes_per_token=int(lm.info.weight_bytes + cache),
                                    measured_tokens_per_s=rate),
                           tuple(e.seconds for e in events))


@dataclass(frozen=True)
class WatchedRoofline:
    roofline: Roofline  # its `impossible` says why a speed past the ceiling is not shown
    noise: Noise  # the reading of the decode steps' own times (busy: no share, no verdict)
    step_seconds: tuple[float, ...]  # each timed decode step (seconds)
    attempt: int = 0  # 1: measured again after a speed past the ceiling


def watched_roofline(lm, new_tokens: int = ROOFLINE_NEW_TOKENS, shared=None,
                     runs=roofline_steps) -> WatchedRoofline:
    """`roofline_steps` under the noise rule; a speed past the ceiling is measured once more,
    and still past it, `Roofline.impossible` says why. `runs`: a test plants one."""
    *_, last = runs(lm, new_tokens, shared, None)
    judged, attempt = noise.reading(last.step_seconds), 0
    if last.roofline.impossible is not None:
        again = max(last.bandwidth_gbs, measure_read_bandwidth(lm.device))
        *_, last = runs(lm, new_tokens, shared, again)
        judged, attempt = noise.reading(last.step_seconds), 1
    return WatchedRoofline(last.roofline, judged, last.step_seconds, attempt)


def measure_compute_roof(lm, r: Roofline, shared=None, new_tokens: int = ROOFLINE_NEW_TOKENS,
                         batch_points=()) -> ComputeRoof:
    """The second roof and the passes under it: `r`'s decode step, a prefill of
    `PREFILL_TOKENS` (median of 3) and the batch sweep's `BatchPoint`s if one has run."""
    info = lm.info
    peak = roofline.machine_gflops(shared, lm.device, lm.model.dtype)
    prompt = prompt_ids(lm.tokenizer, ROOFLINE_PROMPT)
    decode = WorkPoint("decode, batch 1",
                       roofline.forward_flops(info, 1, len(prompt) + new_tokens / 2),
                       r.bytes_per_token, 1 / r.measured_tokens_per_s)
    ids = (prompt * (PREFILL_TOKENS // len(prompt) + 1))[:PREFILL_TOKENS]
    firsts = [next(iter(stream(lm, ids, max_new_tokens=1))) for _ in range(3)]
    first = sorted(firsts, key=lambda e: e.forward_seconds)[1]  # the median run
    prefill = WorkPoint(f"prefill, {len(ids)} tokens", roofline.prefill_flops(info, len(ids)),
                        info.weight_bytes + first.cache_bytes, first.forward_seconds)
    batch = [p for p in roofline.batch_work_points(info, batch_points)
             if not p.label.endswith("batch 1")]
    return ComputeRoof(peak, r.bandwidth_gbs, (decode, *batch, prefill))


def measure_roofline_step_bound(lm) -> StepBound:
    """What bounds a decode step of the roofline's prompt (the race only on a GPU)."""
    return step_bound.measure_step_bound(lm, prompt_ids(lm.tokenizer, ROOFLINE_PROMPT))


def roofline_tokens(prompt: int, cuda: bool) -> int:
    """Tokens 'Measure this machine' feeds: a greedy run, three prefills and a profiled decode;
    on a GPU the captured race adds five greedy runs (two warm-ups, three races)."""
    work = (greedy_tokens(prompt, ROOFLINE_NEW_TOKENS) + 3 * PREFILL_TOKENS
            + step_bound.step_profile_tokens(prompt))
    if cuda:
        work += (2 * greedy_tokens(prompt, step_bound.WARM_UP_TOKENS)
                 + 3 * greedy_tokens(prompt, step_bound.RACE_TOKENS))
    return work
