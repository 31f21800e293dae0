"""'This machine', measured on the loaded model: the read bandwidth and the batch-1 decode speed
under it, the matmul GFLOP/s with the passes under both roofs, and what bounds one decode step
(the profiler's split, one do-nothing operation's fixed cost and, on a GPU, the eager loop raced
against a CUDA graph). A speed past the ceiling is measured again, the bandwidth read again first.
"""
from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import asdict, dataclass

from ..generation import stream
from ..profile_step import StepProfile, captured_greedy, profile_decode_step, tiny_op_seconds
from ..tokens import prompt_ids
from . import WARM_UP_TOKENS, noise, roofline
from .noise import Noise
from .quality import greedy_run, greedy_tokens
from .roofline import ComputeRoof, Roofline, WorkPoint, measure_read_bandwidth

ROOFLINE_PROMPT = "Write a short story about a lighthouse keeper and a storm."
ROOFLINE_NEW_TOKENS = 24  # enough decode steps for a steady median
PREFILL_TOKENS = 256  # a long prompt: intensity ~256× decode's, right of most machines' ridge
PROFILED_STEPS = 4  # decode steps under the profiler (and as many timed without it)
RACE_TOKENS = 128  # the captured race's length on a GPU (a fraction of a second there)


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
                           Roofline(bandwidth, int(lm.info.weight_bytes + cache), rate),
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


@dataclass(frozen=True)
class CapturedRace:
    new_tokens: int  # tokens each side decoded after the same prompt
    captured: bool  # True: the second side replayed a CUDA graph; False: static cache, eager
    eager_tokens_per_s: float  # the engine's loop (DynamicCache), batch 1
    static_tokens_per_s: float  # the static-cache step, run eagerly
    captured_tokens_per_s: float  # the captured step (equals the eager static run on a CPU)
    capture_seconds: float  # one-off: warm-up steps and recording the graph (0 on a CPU)
    same_tokens: bool  # the captured side chose every token the engine chose
    first_difference_at: int | None  # index of the first differing token, if any

    @property
    def speedup(self) -> float:
        """Captured tokens/s ÷ eager tokens/s."""
        return self.captured_tokens_per_s / self.eager_tokens_per_s


def captured_race(lm, ids: list[int], new_tokens: int = RACE_TOKENS) -> CapturedRace:
    """`new_tokens` greedy tokens each way after a warm-up (on a CPU, static cache eagerly)."""
    greedy_run(lm.model, ids, WARM_UP_TOKENS, lm.device)
    captured_greedy(lm.model, ids, WARM_UP_TOKENS, capture=False)
    eager = greedy_run(lm.model, ids, new_tokens, lm.device)
    static = captured_greedy(lm.model, ids, new_tokens, capture=False)
    on_gpu = lm.device.type == "cuda"
    graph = captured_greedy(lm.model, ids, new_tokens, capture=True) if on_gpu else static
    diff = next((i for i, (a, b) in enumerate(zip(eager.token_ids, graph.token_ids)) if a != b),
                None)
    return CapturedRace(new_tokens, graph.captured, eager.decode_tokens_per_s,
                        static.decode_tokens_per_s, graph.decode_tokens_per_s,
                        graph.capture_seconds, graph.token_ids == eager.token_ids, diff)


@dataclass(frozen=True)
class StepBound:
    profile: StepProfile
    tiny_op_seconds: float  # one do-nothing operation, measured here
    race: CapturedRace | None  # None on a CPU (nothing to capture) or when not asked for

    def verdict(self, floor_seconds: float) -> roofline.BoundVerdict:
        """The one rule on this step: its share of the bandwidth roof (floor ÷ step) and of time
        outside the real work (a GPU's idle time between kernels; on a CPU all but matmuls)."""
        p = self.profile
        gpu = p.kernels_per_step is not None and p.device_busy_share is not None
        step = max(p.step_seconds, 1e-12)
        outside = 1 - p.device_busy_share if gpu else 1 - p.matmul_seconds / step
        return roofline.decide_bound(floor_seconds / step, None, overhead_share=max(outside, 0.0),
                                     device="cuda" if gpu else "cpu")

    @property
    def dispatch_seconds(self) -> float:
        """Theoretical: operations per step × one's fixed cost."""
        return self.profile.ops_per_step * self.tiny_op_seconds


def measure_step_bound(lm, ids: list[int] | None = None, steps: int = PROFILED_STEPS,
                       race_tokens: int = RACE_TOKENS) -> StepBound:
    """Profile `steps` decode steps after `ids` (None: the roofline's prompt); on a GPU, race
    the captured step (`race_tokens` 0: no)."""
    ids = prompt_ids(lm.tokenizer, ROOFLINE_PROMPT) if ids is None else ids
    profile = profile_decode_step(lm.model, ids, steps=steps)
    race = (captured_race(lm, ids, race_tokens)
            if lm.device.type == "cuda" and race_tokens > 0 else None)
    return StepBound(profile, tiny_op_seconds(lm.device), race)


def step_figures(bound: StepBound) -> dict:
    """The measurement as plain figures for a results file."""
    return asdict(bound) | {"between_ops_seconds": bound.profile.between_ops_seconds,
                            "dispatch_seconds": bound.dispatch_seconds}


def step_profile_tokens(prompt: int, steps: int = PROFILED_STEPS) -> int:
    """Tokens `profile_decode_step` feeds: the prefill, a warm-up step, `steps` timed steps
    and `steps` profiled ones (a GPU's captured race adds its own)."""
    return prompt + 1 + 2 * steps


def roofline_tokens(prompt: int, cuda: bool) -> int:
    """Tokens 'Measure this machine' feeds: a greedy run, three prefills and a profiled decode;
    on a GPU the captured race adds five greedy runs (two warm-ups, three races)."""
    work = (greedy_tokens(prompt, ROOFLINE_NEW_TOKENS) + 3 * PREFILL_TOKENS
            + step_profile_tokens(prompt))
    if cuda:
        work += 2 * greedy_tokens(prompt, WARM_UP_TOKENS) + 3 * greedy_tokens(prompt, RACE_TOKENS)
    return work
