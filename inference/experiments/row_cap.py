"""How many rows the server's step holds on this machine: the knee of its batch sweep.

While the weights' bytes set a step's pace, rows cost little and tokens/s climbs; once the
arithmetic sets it, each row costs its full share. The server's cap (vLLM's `max_num_seqs`) is
that knee, read from this machine's quiet batch gains. Left out: a knee that moves with context.
"""
from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..config import Settings
from ..kv_cache import kv_cache_bytes
from . import quiet_reference

# No sweep on file: 64 rows. A class of 60 then gets its first tokens together (at 32, 28 of
# them waited for a whole answer), and the block pool holds it (`pool_rows` cuts it if not).
FALLBACK_ROWS = 64
MIN_ROWS = 8  # fewer rows and a class waits in turns; past the knee a row costs no throughput
MARGIN = 0.10  # tokens/s must rise by more than this share to count (the noise of a quiet run)
ROW_TOKENS = 256  # a chat's cache for the memory cap: a question and a few paragraphs
GAIN_KEY = re.compile(r"batch_gain (\d+)÷1 ")


def knee_rows(sweep: Sequence[tuple[int, float]], margin: float = MARGIN) -> int:
    """The largest batch whose tokens/s beats every smaller batch's by more than `margin`
    (a share): past it, step time grows as fast as the rows. `sweep`: (rows, tokens/s).

    Linear to the end (the weights' bytes set the pace throughout): the largest batch.
    >>> knee_rows([(1, 30), (2, 59), (4, 117), (8, 230)])
    8

    Flat (each row costs a full step): one row.
    >>> knee_rows([(1, 100), (2, 101), (4, 99), (8, 100)])
    1

    A rise, then a wobble within the margin: where the rise ended, a dip notwithstanding.
    >>> knee_rows([(1, 30), (2, 58), (4, 110), (8, 180), (16, 175), (32, 190), (64, 150)])
    8
    """
    points = sorted(sweep)
    best_rows, best = points[0]
    for rows, tokens_per_s in points[1:]:
        if tokens_per_s > best * (1 + margin):
            best_rows, best = rows, tokens_per_s
    return best_rows


def sweep_on_file(path: str | None = None, machine: str | None = None) -> list[tuple[int, float]]:
    """This machine's quiet batch gains on file as (rows, relative tokens/s), the highest per
    size; [] if none."""
    gains: dict[int, float] = {}
    for key, figure in quiet_reference.read(path, machine).items():
        if m := GAIN_KEY.match(key):
            gains[int(m[1])] = max(gains.get(int(m[1]), 0.0), figure.value)
    return sorted({1: 1.0, **gains}.items()) if gains else []


@dataclass(frozen=True)
class RowChoice:
    rows: int
    why: str


def choose_rows(sweep: Sequence[tuple[int, float]], memory_rows: int,
                budget_rows: int) -> RowChoice:
    """The cap from a sweep ([]: none on file), cut to `memory_rows` and `budget_rows`.

    >>> choose_rows([(1, 1.0), (16, 14.0), (64, 15.0)], memory_rows=88, budget_rows=255).rows
    16
    >>> choose_rows([(1, 1.0), (4, 3.0)], 88, 255).why  # the knee lies beyond 4
    'tokens/s still rising at 4 rows, the largest batch on file: 64 (the fallback)'
    >>> choose_rows([], memory_rows=20, budget_rows=255).why
    'no batch sweep on file for this machine: 64, cut to 20 by the block pool'
    """
    if not sweep:
        rows, why = FALLBACK_ROWS, f"no batch sweep on file for this machine: {FALLBACK_ROWS}"
    elif (knee := knee_rows(sweep)) == max(r for r, _ in sweep):
        rows = max(knee, FALLBACK_ROWS)
        why = (f"tokens/s still rising at {knee} rows, the largest batch on file: "
               f"{rows}" + (" (the fallback)" if rows > knee else ""))
    else:
        rows = max(knee, MIN_ROWS)
        why = f"this machine's batch sweep levels off after {knee} rows: {rows}"
    if rows > min(memory_rows, budget_rows):
        rows = min(memory_rows, budget_rows)
        why += f", cut to {rows} by the " + ("block pool" if memory_rows <= budget_rows
                                            else "step's token budget")
    return RowChoice(max(1, rows), why)


def pool_rows(lm, settings: Settings) -> int:
    """Rows of `ROW_TOKENS` the server's block pool holds (sized as `PagedBatch.for_server`)."""
    info = lm.info
    per_block = kv_cache_bytes(info.layers, info.kv_heads, info.head_dim, lm.bytes_per_value,
                               tokens=settings.block_tokens)
    blocks = settings.server_pool_blocks or max(1, settings.server_cache_mb * 2**20 // per_block)
    return max(1, blocks // math.ceil(ROW_TOKENS / settings.block_tokens))


def for_server(settings: Settings, lm, reference: str | None = None,
               env: Mapping[str, str] | None = None) -> RowChoice:
    """LLM_LAB_SERVER_ROWS when set above 0, else `choose_rows` from this machine's quiet batch
    sweep (`reference`: its file)."""
    value = (os.environ if env is None else env).get("LLM_LAB_SERVER_ROWS", "").strip()
    if value.isdigit() and int(value) > 0:
        return RowChoice(settings.server_rows, "set by LLM_LAB_SERVER_ROWS")
    budget = settings.step_token_budget - 1 if settings.step_token_budget else 1 << 30
    return choose_rows(sweep_on_file(reference), pool_rows(lm, settings), budget)
