"""Finished results kept in the app's `SharedResults`, for the next visitor and for the other
lessons. Plain functions, no Gradio: handlers call them.

A finished measurement is kept with the noise rule's reading beside it (`keep`), and shown again
to the next visitor only when that reading was quiet (`reuse`): a busy room's numbers are shown
to the visitor who measured them, under the notice, and measured afresh for the next
(`inference/experiments/noise.py`). The lessons quote one another's latest results under a
plain key + device + dtype (`shared_key`): the latest prefill and batch sweeps (the machine's
summary quotes them, whoever ran them), lesson 6's latest comparison (lesson 5 prices it).
"""
from __future__ import annotations

import time
from collections.abc import Hashable

from inference.experiments.noise import Noise
from visualizations.exports import machine_figures_md

LAST_PREFILL = "export-prefill"
LAST_BATCH = "export-batch"
PRESENTER_BATCH = "presenter-batch"  # lessons.presenter_handlers keeps its batch points here
LAST_MODES = "export-modes"  # lesson 6's latest finished comparison (lesson 5 prices it)


def keep(shared, key: Hashable, value: object, judged: Noise | None) -> None:
    """Store a finished run's value under `key` (the chart's CSV export and the machine's
    summary read it there) and its reading beside it (`shared` None: nothing kept)."""
    if shared is None:
        return
    shared.put(("noise", key), judged)
    shared.put(key, value)


def reuse(shared, key: Hashable) -> tuple[object, Noise] | None:
    """(value, its quiet reading) when a run measured on a quiet machine is kept, else None."""
    if shared is None:
        return None
    value, judged = shared.get(key), shared.get(("noise", key))
    if value is None or judged is None or judged.busy:
        return None
    return value, judged


def shared_key(lm, name: str) -> tuple:
    """The key of result `name` for this model's device and dtype."""
    return (name, lm.info.device, lm.info.dtype)


def keep_modes(lm, shared, reports) -> None:
    """Keep lesson 6's finished comparison (its `ModeReport`s) for the other lessons."""
    if shared is not None:
        shared.put(shared_key(lm, LAST_MODES), tuple(reports))


def latest_modes(lm, shared) -> tuple:
    """Lesson 6's latest finished comparison on this machine, or ()."""
    return (shared.get(shared_key(lm, LAST_MODES)) or ()) if shared is not None else ()


def latest_batch_points(lm, shared) -> tuple:
    """The latest batch sweep's points on this machine (the lesson's, else the presenter's)."""
    if shared is None:
        return ()
    return (shared.get(shared_key(lm, LAST_BATCH)) or shared.get(shared_key(lm, PRESENTER_BATCH))
            or ())


def figures_md(lm, shared, roofline=None, busy: bool = False) -> str:
    """This machine's figures: the roofline just measured (`busy`: its decode run was), the
    latest shared sweeps."""
    get = shared.get if shared is not None else (lambda _key: None)
    batch = latest_batch_points(lm, shared)
    return machine_figures_md(lm.info, roofline, get(shared_key(lm, LAST_PREFILL)) or (), batch,
                              when=time.strftime("%Y-%m-%d %H:%M"), busy=busy)
