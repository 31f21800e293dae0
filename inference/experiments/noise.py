"""Measuring on a shared machine: was it busy, figures that survive it, and the bounds physics
sets on them.

Busy or not, one rule decides from three signals measured during the run: the **repeat spread**
(interquartile range ÷ median of one step's timings), the **calibration drift** (a fixed matrix
product timed before and after) and **other programs' CPU** (Linux `/proc/stat`). Any past its
limit marks the run busy: its numbers are shown with a notice and no verdict. Not covered:
other kernels on a shared GPU.

Another program can only *add* time to a step, so a figure leans on the low timings, and two
kinds of work are timed turn by turn so both share whatever the machine was doing (a machine
busy for the whole run slows both lanes alike: a ratio cancels that). Some wrong figures are not
noisy but impossible: each bound returns None when a figure is possible, else one sentence
saying what is wrong, allowing `Settings.sanity_noise` past it. A figure that fails is measured
again once; still failing, the screen shows the sentence.
"""
from __future__ import annotations

import contextlib
import os
import statistics
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch

from ..config import LIMITS, Settings
from ..stats import percentile
from ..timing import stopwatch

CALIBRATION_SIZE = 192  # the calibration op: a [192, 192] @ [192, 192] product ...
CALIBRATION_REPEATS = 8  # ... this many times, timed as one; the fastest of 3 such runs
MIN_CPU_WINDOW_S = 0.3  # /proc/stat counts in 10 ms ticks: shorter windows say nothing


@dataclass(frozen=True)
class CpuReading:
    """Counters at one moment (Linux); None where the system does not expose them."""

    wall_s: float  # time.perf_counter() (seconds)
    machine_busy_s: float | None  # CPU-seconds every core has been busy since boot (all processes)
    own_s: float  # CPU-seconds this process has used, all threads (user + system)


@dataclass(frozen=True)
class Watch:
    cpu: CpuReading
    calibration_s: float | None  # the calibration op before the run (seconds), None if skipped


@dataclass(frozen=True)
class Noise:
    spread: float | None  # repeats' interquartile range ÷ median (unitless); None: < 4 repeats
    calibration_ratio: float | None  # slower ÷ faster calibration, before vs after (≥ 1)
    others_cpu: float | None  # share of the machine's CPU other processes used (0..1)
    busy: bool  # any signal past its limit: show the notice, draw no verdict
    reasons: tuple[str, ...] = ()  # one plain phrase per signal past its limit


def repeat_spread(seconds: Sequence[float]) -> float | None:
    """Interquartile range ÷ median of repeated timings of the same work; None under 4.

    >>> round(repeat_spread([1.0, 1.0, 1.1, 1.0, 1.0, 3.0]), 3)  # one outlier barely counts
    0.075
    """
    xs = sorted(float(s) for s in seconds)
    if len(xs) < 4:
        return None
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    med = statistics.median(xs)
    return (q3 - q1) / med if med > 0 else None


def judge(spread: float | None = None, calibration_ratio: float | None = None,
          others_cpu: float | None = None, settings: Settings = LIMITS) -> Noise:
    """Busy if any signal measured is past its limit (`settings.noise_*`)."""
    reasons = []
    if spread is not None and spread > settings.noise_spread_limit:
        reasons.append(f"repeats of the same step varied by {spread:.0%}")
    if calibration_ratio is not None and calibration_ratio > settings.noise_calibration_limit:
        reasons.append(f"a fixed test product ran {calibration_ratio:.1f}× slower at one end "
                       "of the run than at the other")
    if others_cpu is not None and others_cpu > settings.noise_others_cpu_limit:
        reasons.append(f"other programs used {others_cpu:.0%} of this machine's CPU")
    return Noise(spread, calibration_ratio, others_cpu, bool(reasons), tuple(reasons))


def cpu_reading() -> CpuReading:
    busy = None
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        busy = (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")  # up to steal, no guests
    except (OSError, ValueError, IndexError):
        pass
    t = os.times()
    return CpuReading(time.perf_counter(), busy, t.user + t.system)


def others_cpu_share(start: CpuReading, end: CpuReading) -> float | None:
    wall = end.wall_s - start.wall_s
    if start.machine_busy_s is None or end.machine_busy_s is None or wall < MIN_CPU_WINDOW_S:
        return None
    others = (end.machine_busy_s - start.machine_busy_s) - (end.own_s - start.own_s)
    return min(max(others / (wall * (os.cpu_count() or 1)), 0.0), 1.0)


@torch.inference_mode()
def calibration_seconds(device) -> float:
    a = torch.ones(CALIBRATION_SIZE, CALIBRATION_SIZE, device=device)  # a: [N, N], float32
    best = float("inf")
    for _ in range(3):
        with stopwatch(device) as t:
            for _ in range(CALIBRATION_REPEATS):
                a @ a
        best = min(best, t[0])
    return best


def begin(device, calibrate: bool = True) -> Watch:
    return Watch(cpu_reading(), calibration_seconds(device) if calibrate else None)


def end(device, watch: Watch, repeats: Sequence[float] = (), settings: Settings = LIMITS
        ) -> tuple[Noise, Watch]:
    """The decision and the next watch. `repeats`: timings of the same work, for their spread;
    a run shorter than `MIN_CPU_WINDOW_S` waits it out, so a busy machine is still seen."""
    ratio = after = None
    if watch.calibration_s is not None:
        after = calibration_seconds(device)
        ratio = max(after, watch.calibration_s) / max(min(after, watch.calibration_s), 1e-12)
    time.sleep(max(0.0, MIN_CPU_WINDOW_S - (time.perf_counter() - watch.cpu.wall_s)))
    cpu = cpu_reading()
    judged = judge(repeat_spread(repeats), ratio, others_cpu_share(watch.cpu, cpu), settings)
    return judged, Watch(cpu, after)


@dataclass
class Watching:
    """One measurement under the noise rule: its open watch and every reading taken."""

    device: object
    watch: Watch
    readings: list[Noise] = field(default_factory=list)


_open = threading.local()  # .now: the Watching of the measurement whose step runs here


@contextlib.contextmanager
def watching(measured: Watching) -> Iterator[Watching]:
    """Run a step of `measured` (on this thread) with its watch open for `reading`."""
    before = getattr(_open, "now", None)
    _open.now = measured
    try:
        yield measured
    finally:
        _open.now = before


def reading(repeats: Sequence[float] = (), settings: Settings = LIMITS) -> Noise:
    """The reading of the measurement running now (its watch ends; the next starts here).
    Outside a measurement, from the spread of `repeats` alone."""
    measured = getattr(_open, "now", None)
    if measured is None:
        return judge(repeat_spread(repeats), settings=settings)
    judged, measured.watch = end(measured.device, measured.watch, repeats, settings)
    measured.readings.append(judged)
    return judged


SPLIT_FLOOR = 0.01  # a part under 1% of the step, though it ran operations, was not measured


def split_holds(noise: Noise, parts_seconds: Sequence[float], step_seconds: float) -> bool:
    """Whether a split of one step into parts can be shown: quiet, no part ~0, none too many."""
    if noise.busy or step_seconds <= 0:
        return False
    small = any(s < SPLIT_FLOOR * step_seconds for s in parts_seconds)
    return not small and sum(parts_seconds) <= step_seconds * (1 + SPLIT_FLOOR)


LOW_QUANTILE = 0.25  # interference only adds time: lean on the faster repeats, not the fastest
ROUNDS = 5  # interleaved rounds a run's pairs are split into, for the range
NEIGHBOURS = 2  # each side: a step's robust time is the median of 2 × 2 + 1 steps
BOUND_NOISE = LIMITS.sanity_noise  # a bound allows this share past it


@dataclass(frozen=True)
class Robust:
    """A figure from repeated timings: its robust estimate and its spread over rounds.

    >>> Robust(2.83, 2.6, 3.04, 5).label()
    '2.8×, range 2.6–3.0 over 5 rounds'
    """

    estimate: float  # the figure (unit below)
    low: float  # lowest round's figure
    high: float  # highest round's figure
    rounds: int  # rounds the range was taken over
    unit: str = "×"

    def label(self) -> str:
        if self.rounds < 2:
            return f"{self.estimate:.1f}{self.unit}, one round"
        return (f"{self.estimate:.1f}{self.unit}, range {self.low:.1f}–{self.high:.1f} "
                f"over {self.rounds} rounds")

    @property
    def spread(self) -> float:
        """(high − low) ÷ estimate: how far the rounds disagreed (unitless)."""
        return (self.high - self.low) / self.estimate if self.estimate else 0.0


def low_quantile(seconds: Sequence[float], q: float = LOW_QUANTILE) -> float:
    """The q-quantile of repeated timings (the project's nearest-rank percentile rule).

    >>> low_quantile([1.0, 1.1, 1.0, 10.0, 1.05])  # one step slowed 10×: not seen
    1.0
    """
    if len(seconds) == 0:
        raise ValueError("no timings")
    return float(percentile(seconds, q * 100))


def running_median(seconds: Sequence[float], neighbours: int = NEIGHBOURS) -> list[float]:
    """Each step's time as the median of it and `neighbours` steps each side (the window
    slides inwards at the ends). A lone slowed step is dropped; a steady trend is kept.

    >>> running_median([1.0, 1.1, 1.2, 9.0, 1.4, 1.5, 1.6])  # step 3 slowed: gone
    [1.2, 1.2, 1.2, 1.4, 1.5, 1.5, 1.5]
    """
    xs = [float(s) for s in seconds]
    width = min(2 * neighbours + 1, len(xs))
    out = []
    for i in range(len(xs)):
        start = min(max(i - neighbours, 0), len(xs) - width)
        out.append(statistics.median(xs[start:start + width]))
    return out


def low_ratio(numerator: Sequence[float], denominator: Sequence[float],
              scale: float = 1.0, unit: str = "×") -> Robust:
    """scale × low quantile(numerator) ÷ low quantile(denominator), for repeats of two kinds of
    work; the range is the same ratio round by round (the k-th repeat of each).

    >>> low_ratio([0.1] * 6, [0.4] * 6, scale=16).label()  # 16 rows at 4× the step time
    '4.0×, range 4.0–4.0 over 6 rounds'
    """
    estimate = scale * low_quantile(numerator) / low_quantile(denominator)
    per_round = [scale * n / d for n, d in zip(numerator, denominator, strict=False) if d > 0]
    if not per_round:
        return Robust(estimate, estimate, estimate, 1, unit)
    return Robust(estimate, min(per_round), max(per_round), len(per_round), unit)


def paired_ratio(numerator: Sequence[float], denominator: Sequence[float],
                 common: float = 0.0, rounds: int = ROUNDS, unit: str = "×") -> Robust:
    """Two lanes timed in pairs: the ratio of their totals after `running_median`, plus
    `common` seconds of identical work in both. The range: the same ratio over `rounds`
    interleaved rounds (round j holds pairs j, j + rounds, ...), each spanning the whole run.

    >>> paired_ratio([3.0] * 10, [1.0] * 10).label()
    '3.0×, range 3.0–3.0 over 5 rounds'
    """
    n = min(len(numerator), len(denominator))
    if n == 0:
        raise ValueError("no pairs")
    num, den = running_median(numerator[:n]), running_median(denominator[:n])
    rounds = max(1, min(rounds, n))

    def ratio(idx: Sequence[int]) -> float:
        share = len(idx) / n  # the common work, shared out in proportion to the round's size
        return ((common * share + sum(num[i] for i in idx))
                / max(common * share + sum(den[i] for i in idx), 1e-12))

    per_round = [ratio(range(j, n, rounds)) for j in range(rounds)]
    return Robust(ratio(range(n)), min(per_round), max(per_round), rounds, unit)


def batch_gain(batch: int, gain: float) -> str | None:
    """A batch of `batch` rows measured `gain`× the throughput of one row.

    >>> batch_gain(16, 67.0)
    '16 rows measured 67.0× the throughput of one row: 16 rows can give at most 16×.'
    """
    if gain > batch * (1 + BOUND_NOISE):
        return (f"{batch} rows measured {gain:.1f}× the throughput of one row: {batch} rows "
                f"can give at most {batch}×.")
    return None


def batch_step(batch: int, step_seconds: float, one_row_seconds: float) -> str | None:
    """A `batch`-row decode step took `step_seconds`; a 1-row step took `one_row_seconds`."""
    if batch > 1 and step_seconds * (1 + BOUND_NOISE) < one_row_seconds:
        return (f"a {batch}-row step measured {step_seconds / one_row_seconds:.2f}× as long as "
                f"a 1-row step: it does all of that work and more, so it cannot be shorter.")
    return None


def cached_step(cached_seconds: float, recompute_seconds: float) -> str | None:
    """The cached lane against recomputing the same positions (one step or a whole race)."""
    if cached_seconds > recompute_seconds * (1 + BOUND_NOISE):
        return (f"the cached lane measured {cached_seconds / recompute_seconds:.2f}× as long as "
                "recomputing the same positions: it runs one token where recomputing runs them "
                "all, so it cannot be slower.")
    return None


def bandwidth(tokens_per_s: float, ceiling_tokens_per_s: float) -> str | None:
    if ceiling_tokens_per_s > 0 and tokens_per_s > ceiling_tokens_per_s * (1 + BOUND_NOISE):
        return (f"{tokens_per_s:.1f} tokens/s is past this machine's measured ceiling of "
                f"{ceiling_tokens_per_s:.1f} tokens/s: each token must read its bytes from "
                "memory.")
    return None


def one_pass(tokens: int, speedup: float) -> str | None:
    """Feeding `tokens` tokens one pass each took `speedup`× as long as one pass over them.

    >>> print(one_pass(16, 40.0))  # doctest: +ELLIPSIS
    one pass over 16 tokens measured 40.0× faster than 16 one-token passes: ...at most 16×...
    """
    if speedup > tokens * (1 + BOUND_NOISE):
        return (f"one pass over {tokens} tokens measured {speedup:.1f}× faster than {tokens} "
                f"one-token passes: it does all of a one-token pass's work, so it can be at "
                f"most {tokens}× faster.")
    return None


def same_throughput(batch: int, used_tokens_per_s: float, sweep_tokens_per_s: float) -> str | None:
    """A cost's tokens/s at `batch` rows against the same visitor's batch sweep there.

    >>> same_throughput(16, 126.0, 8.6)  # doctest: +ELLIPSIS
    'this cost uses 126.0 tokens/s at batch 16, but your batch sweep measured 8.6 ...'
    """
    hi, lo = max(used_tokens_per_s, sweep_tokens_per_s), min(used_tokens_per_s, sweep_tokens_per_s)
    if lo <= 0 or hi > lo * (1 + BOUND_NOISE):
        return (f"this cost uses {used_tokens_per_s:.1f} tokens/s at batch {batch}, but your "
                f"batch sweep measured {sweep_tokens_per_s:.1f} tokens/s there: one of them "
                "was disturbed, so no cost is drawn from it.")
    return None
