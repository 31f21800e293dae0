"""What physics allows a measurement to say: the bounds every headline figure is checked against.

Some wrong figures are not noisy but impossible. Each bound returns None when the figure is
possible, else one sentence saying what is wrong, allowing `Settings.sanity_noise` past it. A
figure that fails is measured again once; still failing, the screen shows the sentence.
"""
from __future__ import annotations

from ..config import LIMITS

NOISE = LIMITS.sanity_noise


def batch_gain(batch: int, gain: float, noise: float = NOISE) -> str | None:
    """A batch of `batch` rows measured `gain`× the throughput of one row.

    >>> batch_gain(16, 67.0)
    '16 rows measured 67.0× the throughput of one row: 16 rows can give at most 16×.'
    """
    if gain > batch * (1 + noise):
        return (f"{batch} rows measured {gain:.1f}× the throughput of one row: {batch} rows "
                f"can give at most {batch}×.")
    return None


def batch_step(batch: int, step_seconds: float, one_row_seconds: float,
               noise: float = NOISE) -> str | None:
    """A `batch`-row decode step took `step_seconds`; a 1-row step took `one_row_seconds`."""
    if batch > 1 and step_seconds * (1 + noise) < one_row_seconds:
        return (f"a {batch}-row step measured {step_seconds / one_row_seconds:.2f}× as long as "
                f"a 1-row step: it does all of that work and more, so it cannot be shorter.")
    return None


def cached_step(cached_seconds: float, recompute_seconds: float,
                noise: float = NOISE) -> str | None:
    """The cached lane against recomputing the same positions (one step or a whole race)."""
    if cached_seconds > recompute_seconds * (1 + noise):
        return (f"the cached lane measured {cached_seconds / recompute_seconds:.2f}× as long as "
                "recomputing the same positions: it runs one token where recomputing runs them "
                "all, so it cannot be slower.")
    return None


def bandwidth(tokens_per_s: float, ceiling_tokens_per_s: float,
              noise: float = NOISE) -> str | None:
    if ceiling_tokens_per_s > 0 and tokens_per_s > ceiling_tokens_per_s * (1 + noise):
        return (f"{tokens_per_s:.1f} tokens/s is past this machine's measured ceiling of "
                f"{ceiling_tokens_per_s:.1f} tokens/s: each token must read its bytes from "
                "memory.")
    return None


def one_pass(tokens: int, speedup: float, noise: float = NOISE) -> str | None:
    """Feeding `tokens` tokens one pass each took `speedup`× as long as one pass over them.

    >>> print(one_pass(16, 40.0))  # doctest: +ELLIPSIS
    one pass over 16 tokens measured 40.0× faster than 16 one-token passes: ...at most 16×...
    """
    if speedup > tokens * (1 + noise):
        return (f"one pass over {tokens} tokens measured {speedup:.1f}× faster than {tokens} "
                f"one-token passes: it does all of a one-token pass's work, so it can be at "
                f"most {tokens}× faster.")
    return None


def same_throughput(batch: int, used_tokens_per_s: float, sweep_tokens_per_s: float,
                    noise: float = NOISE) -> str | None:
    """A cost's tokens/s at `batch` rows against the same visitor's batch sweep there.

    >>> same_throughput(16, 126.0, 8.6)  # doctest: +ELLIPSIS
    'this cost uses 126.0 tokens/s at batch 16, but your batch sweep measured 8.6 ...'
    """
    hi, lo = max(used_tokens_per_s, sweep_tokens_per_s), min(used_tokens_per_s, sweep_tokens_per_s)
    if lo <= 0 or hi > lo * (1 + noise):
        return (f"this cost uses {used_tokens_per_s:.1f} tokens/s at batch {batch}, but your "
                f"batch sweep measured {sweep_tokens_per_s:.1f} tokens/s there: one of them "
                "was disturbed, so no cost is drawn from it.")
    return None
