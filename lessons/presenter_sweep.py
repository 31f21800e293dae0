"""One batch sweep per visitor: the batching screen's measured points, kept in the visitor's
record (their browser) as plain numbers, read back by the cost screen, which prices those
points instead of measuring another sweep; and the check that a cost still agrees with the
sweep its visitor has now (`sanity.same_throughput`): a visitor who runs the batching screen
again after pricing sees the old cost withdrawn, never two throughputs for one batch."""
from __future__ import annotations

import time
from dataclasses import asdict, fields

from inference.experiments.batch_sweep import BatchPoint
from inference.experiments.sanity import same_throughput

BATCH_KEY, COST_KEY = "batch", "cost"  # the two screens' `measure:` keys
POINT_FIELDS = {f.name for f in fields(BatchPoint)}


def sweep_figures(points) -> dict:
    """A finished sweep as the plain numbers a visitor's record can hold, with when it ran."""
    return {"sweep": [asdict(p) for p in points], "at": time.strftime("%H:%M")}


def visitor_sweep(result: dict | None) -> tuple[tuple[BatchPoint, ...], bool, str] | None:
    """(points, measured on a busy machine, when) of the sweep a visitor's batching screen
    measured; None when they have not run it (or their record's copy does not read back).

    >>> p = BatchPoint(1, 20, 0.2, 0.08, (0.08,), 10**6, 10**8)
    >>> points, busy, at = visitor_sweep({"noisy": False, "figures": sweep_figures([p])})
    >>> points == (p,), busy
    (True, False)
    >>> visitor_sweep({"figures": {"sweep": [{"batch": "x"}]}}) is None
    True
    """
    figures = (result or {}).get("figures") or {}
    raw = figures.get("sweep")
    if not isinstance(raw, list) or not raw:
        return None
    try:
        points = tuple(BatchPoint(**{k: tuple(v) if isinstance(v, list) else v
                                     for k, v in d.items() if k in POINT_FIELDS}) for d in raw)
        if any(p.step_seconds <= 0 or p.batch < 1 for p in points):
            return None
    except (TypeError, ValueError, AttributeError):
        return None
    return points, bool((result or {}).get("noisy")), str(figures.get("at", ""))


def cost_figures(batch: int, tokens_per_s: float, source: str) -> dict:
    """What a cost was computed from: the batch, its measured tokens/s, and whose sweep."""
    return {"batch": batch, "tokens_per_s": tokens_per_s, "source": source}


def withdrawn_cost(results: dict) -> str | None:
    """Why the visitor's cost no longer stands (their newest batch sweep measured another
    throughput at the batch it priced), or None."""
    cost = (results.get(COST_KEY) or {}).get("figures") or {}
    own = visitor_sweep(results.get(BATCH_KEY))
    if own is None or "batch" not in cost:
        return None
    at = [p for p in own[0] if p.batch == cost["batch"]]
    if not at:
        return None
    return same_throughput(cost["batch"], float(cost["tokens_per_s"]), at[0].tokens_per_s)


def shown_result(key: str, results: dict) -> dict | None:
    """The result a screen shows: as measured, except a cost its visitor's newer batch sweep
    contradicts, shown withdrawn with why (no figure)."""
    got = results.get(key)
    why = withdrawn_cost(results) if key == COST_KEY and got else None
    if why is None:
        return got
    return {**got, "shown": "—", "noisy": True, "label": "no cost from this run",
            "detail": f"{why} Press the button again: it prices your newest batch sweep."}
