"""A finished measurement kept in `SharedResults` with the noise rule's reading beside it, and
shown again to the next visitor only when that reading was quiet.

The value is stored under its key as before (the chart's CSV export and the machine's summary
read it there), and its `Noise` under `noise_key(key)`. `reuse` hands back (value, noise) for
a quiet run and None for a busy one, a run with no reading, or nothing stored: a busy room's
numbers are shown to the visitor who measured them, under the notice, and measured afresh for
the next (`inference/experiments/noise.py`).

>>> from inference.experiments.noise import judge
>>> from inference.experiments.shared_results import SharedResults
>>> shared = SharedResults()
>>> keep(shared, ("sweep", 8), (1, 2), judge(others_cpu=0.6))  # busy: stored, not reused
>>> reuse(shared, ("sweep", 8)) is None, shared.get(("sweep", 8))
(True, (1, 2))
>>> keep(shared, ("sweep", 8), (3, 4), judge(others_cpu=0.02))
>>> reuse(shared, ("sweep", 8))[0]
(3, 4)
"""
from __future__ import annotations

from collections.abc import Hashable

from inference.experiments.noise import Noise


def noise_key(key: Hashable) -> tuple:
    """Where the reading of the run stored under `key` is kept."""
    return ("noise", key)


def keep(shared, key: Hashable, value: object, judged: Noise | None) -> None:
    """Store a finished run's value and its reading (`shared` None: nothing kept)."""
    if shared is None:
        return
    shared.put(noise_key(key), judged)
    shared.put(key, value)


def reuse(shared, key: Hashable) -> tuple[object, Noise] | None:
    """(value, its quiet reading) when a run measured on a quiet machine is kept, else None."""
    if shared is None:
        return None
    value, judged = shared.get(key), shared.get(noise_key(key))
    if value is None or judged is None or judged.busy:
        return None
    return value, judged
