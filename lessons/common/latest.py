"""What the visitors of one app share: finished results kept in its `SharedResults` under name
+ device + dtype (`shared_key`), reused by the next visitor only when measured on a quiet machine
(`reuse`), and views many tabs watch, computed once per interval (`SharedSnapshot`). No Gradio.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from inference.experiments.noise import Noise
from visualizations.exports import machine_figures_md

LAST_PREFILL = "export-prefill"
LAST_BATCH = "export-batch"
PRESENTER_BATCH = "presenter-batch"  # lessons.presenter_handlers keeps its batch points here
LAST_MODES = "export-modes"  # lesson 6's latest finished comparison (lesson 5 prices it)
BATCH_POINTS = (LAST_BATCH, PRESENTER_BATCH)  # the latest batch sweep: the lesson's, else these


def keep(shared, key: Hashable, value: object, judged: Noise | None) -> None:
    if shared is not None:
        shared.put(("noise", key), judged)
        shared.put(key, value)


def reuse(shared, key: Hashable) -> tuple[object, Noise] | None:
    """(value, its reading) when a run measured on a quiet machine is kept, else None."""
    if shared is None:
        return None
    value, judged = shared.get(key), shared.get(("noise", key))
    if value is None or judged is None or judged.busy:
        return None
    return value, judged


def shared_key(lm, name: str) -> tuple:
    return (name, lm.info.device, lm.info.dtype)


def keep_latest(lm, shared, name: str, points) -> None:
    """`points` as this machine's latest `name` (LAST_PREFILL, LAST_BATCH, LAST_MODES)."""
    if shared is not None:
        shared.put(shared_key(lm, name), tuple(points))


def latest(lm, shared, *names: str) -> tuple:
    """This machine's latest points under the first of `names` that has any, else ()."""
    kept = (shared.get(shared_key(lm, name)) for name in names) if shared is not None else ()
    return next(filter(None, kept), ())


def figures_md(lm, shared, roofline=None, busy: bool = False) -> str:
    """This machine's figures: the roofline just measured, the latest shared sweeps."""
    return machine_figures_md(lm.info, roofline, latest(lm, shared, LAST_PREFILL),
                              latest(lm, shared, *BATCH_POINTS),
                              when=time.strftime("%Y-%m-%d %H:%M"), busy=busy)


T = TypeVar("T")


class SharedSnapshot(Generic[T]):
    """A value recomputed at most once per `interval_s` and read by every caller (the first
    after that recomputes while the others wait), so thirty watching tabs cost what one does."""

    def __init__(self, compute: Callable[[], T], interval_s: float) -> None:
        self.compute, self.interval_s = compute, interval_s
        self._lock = threading.Lock()
        self._value: T | None = None
        self._at = -float("inf")  # time.monotonic() of the last computation, s
        self.computations = 0  # how many times `compute` ran (the test counts them)

    def get(self) -> T:
        with self._lock:
            now = time.monotonic()
            if now - self._at >= self.interval_s or self.computations == 0:
                self._value = self.compute()
                self._at = time.monotonic()
                self.computations += 1
            return self._value
