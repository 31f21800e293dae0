"""The one percentile rule every figure uses: the lesson 5 schedulers, the bench, the tests."""
from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest rank: the smallest value with at least `q`% of the values at or below it
    (q in 0..100, so p95 is `percentile(xs, 95)`); 0.0 when there are none.

    >>> percentile([15, 20, 35, 40, 50], 40)
    20
    >>> percentile(range(1, 11), 50), percentile(range(1, 11), 95), percentile([7], 0)
    (5, 10, 7)
    >>> percentile([], 95)
    0.0
    """
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered), max(1, math.ceil(q * len(ordered) / 100))) - 1]
