"""Was the machine busy while we measured? One rule decides, from the measurement itself.

Three signals, measured during the run: the **repeat spread** (interquartile range ÷ median of
one step's timings), the **calibration drift** (a fixed matrix product timed before and after)
and **other programs' CPU** (Linux `/proc/stat`). Any past its limit marks the run busy: its
numbers are shown with a notice and no verdict. Not covered: other kernels on a shared GPU.
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
