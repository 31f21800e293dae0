"""The two roofs of this machine, and the one rule that says which bound a step.

    decode tokens/s  ≤ memory bandwidth ÷ bytes read per token           (the bandwidth roof)
    attainable FLOP/s = min(peak FLOP/s, bandwidth × arithmetic intensity) (the compute roof)

At batch B one read of the weights serves B tokens, so the ceiling rises about B-fold until the
arithmetic limits it. Intensity says which roof a pass *could* reach first, not which it did:
`decide_bound` reads the step's measured share of each roof, and claims no unmeasured cause.
'This machine', measured on the loaded model: the read bandwidth and the batch-1 decode speed
under it, the matmul GFLOP/s with the passes under both roofs, and what bounds one decode step
(the profiler's split, one do-nothing operation's fixed cost and, on a GPU, the eager loop raced
against a CUDA graph). A speed past the ceiling is measured again, the bandwidth read again first.
"""
from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace

import torch

from ..generation import decode_step, prefill, stream
from ..profile_step import StepProfile, captured_greedy, profile_decode_step, tiny_op_seconds
from ..timing import stopwatch
from ..tokens import prompt_ids
from . import WARM_UP_TOKENS, noise
from .noise import Noise, low_quantile
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
        return noise.bandwidth(self.measured_tokens_per_s or 0.0, self.ceiling_tokens_per_s)


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


@dataclass(frozen=True)
class GreedyRun:
    """A timed greedy decode: lesson 6's speed of each mode, the captured race's eager side."""

    token_ids: tuple[int, ...]  # the first comes from prefill, the rest from decode steps
    prefill_seconds: float
    step_seconds: tuple[float, ...]  # one per decode step

    @property
    def decode_tokens_per_s(self) -> float:
        """From the steps' low quantile (a few slowed steps do not move it), warm-up dropped."""
        steps = self.step_seconds[1:] or self.step_seconds
        typical = low_quantile(steps) if steps else 0.0
        return 1 / typical if typical > 0 else 0.0


def greedy_steps(model, prompt_ids: list[int], n: int, device: torch.device
                 ) -> Iterator[GreedyRun]:
    """`greedy_run` a step at a time: the run so far after the prefill and after each step
    (the server may step at each yield, never inside a timed step)."""
    pre = prefill(model, torch.tensor([list(prompt_ids)], device=device))
    token = pre.logits.argmax(-1)  # [1]
    ids, times = [int(token)], []
    yield GreedyRun(tuple(ids), pre.seconds, ())
    for _ in range(n - 1):
        with stopwatch(device) as t:
            logits = decode_step(model, token, pre.cache)  # [1, V]
            token = logits.argmax(-1)
        ids.append(int(token))
        times.append(t[0])
        yield GreedyRun(tuple(ids), pre.seconds, tuple(times))


def greedy_run(model, prompt_ids: list[int], n: int, device: torch.device) -> GreedyRun:
    *_, run = greedy_steps(model, prompt_ids, n, device)
    return run


def greedy_tokens(prompt: int, new: int) -> int:
    """Tokens a greedy run of `new` tokens feeds: the prompt, then one token a step."""
    return prompt + new - 1


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
    noise: Noise | None = None  # `watched_roofline`: the steps' reading (busy: no verdict)
    attempt: int = 0  # 1: measured again after a speed past the ceiling


def roofline_steps(lm, new_tokens: int = ROOFLINE_NEW_TOKENS, shared=None,
                   bandwidth_gbs: float | None = None) -> Iterator[RooflineProgress]:
    """An update after each timed decode step, then the roofline."""
    bandwidth = bandwidth_gbs or machine_bandwidth(shared, lm.device)
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


def watched_roofline(lm, new_tokens: int = ROOFLINE_NEW_TOKENS, shared=None,
                     runs=roofline_steps) -> RooflineProgress:
    """`roofline_steps`' last update under the noise rule; a speed past the ceiling is measured
    once more, and still past it, `Roofline.impossible` says why. `runs`: a test plants one."""
    *_, last = runs(lm, new_tokens, shared, None)
    judged, attempt = noise.reading(last.step_seconds), 0
    if last.roofline.impossible is not None:
        again = max(last.bandwidth_gbs, measure_read_bandwidth(lm.device))
        *_, last = runs(lm, new_tokens, shared, again)
        judged, attempt = noise.reading(last.step_seconds), 1
    return replace(last, noise=judged, attempt=attempt)


def measure_compute_roof(lm, r: Roofline, shared=None, new_tokens: int = ROOFLINE_NEW_TOKENS,
                         batch_points=()) -> ComputeRoof:
    """The second roof and the passes under it: `r`'s decode step, a prefill of
    `PREFILL_TOKENS` (median of 3) and the batch sweep's `BatchPoint`s if one has run."""
    info = lm.info
    peak = machine_gflops(shared, lm.device, lm.model.dtype)
    prompt = prompt_ids(lm.tokenizer, ROOFLINE_PROMPT)
    decode = WorkPoint("decode, batch 1",
                       forward_flops(info, 1, len(prompt) + new_tokens / 2),
                       r.bytes_per_token, 1 / r.measured_tokens_per_s)
    ids = (prompt * (PREFILL_TOKENS // len(prompt) + 1))[:PREFILL_TOKENS]
    firsts = [next(iter(stream(lm, ids, max_new_tokens=1))) for _ in range(3)]
    first = sorted(firsts, key=lambda e: e.forward_seconds)[1]  # the median run
    prefill = WorkPoint(f"prefill, {len(ids)} tokens", prefill_flops(info, len(ids)),
                        info.weight_bytes + first.cache_bytes, first.forward_seconds)
    batch = [p for p in batch_work_points(info, batch_points)
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

    def verdict(self, floor_seconds: float) -> BoundVerdict:
        """The one rule on this step: its share of the bandwidth roof (floor ÷ step) and of time
        outside the real work (a GPU's idle time between kernels; on a CPU all but matmuls)."""
        p = self.profile
        gpu = p.kernels_per_step is not None and p.device_busy_share is not None
        step = max(p.step_seconds, 1e-12)
        outside = 1 - p.device_busy_share if gpu else 1 - p.matmul_seconds / step
        return decide_bound(floor_seconds / step, None, overhead_share=max(outside, 0.0),
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
