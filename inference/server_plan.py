"""One server step's schedule, decided before any forward pass, as vLLM v1's scheduler: who
may join the batch now (`admission`), how the step's token budget is split between the
decoding rows and the rows mid-prefill (`split_budget`), and the frozen record of it all
(`StepPlan`, vLLM's `SchedulerOutput`) that the step executes and the live view draws.

Pure bookkeeping: nothing here runs the model or touches the server's threads.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .block_pool import BlockPool

WAIT_ROWS, WAIT_BUDGET = "every row is taken", "the step's token budget is spent"
WAIT_BLOCKS, WAIT_SHARED = "no free block", "its prompt's next block is being computed"


def admission(pool: BlockPool, tokens: Sequence[int], rows: int, max_rows: int,
              budget_left: float) -> str:
    """Why a waiting request of these tokens cannot join the batch now ("" when it can), as
    vLLM's scheduler: a row under `max_rows` (`max_num_seqs`), some of the step's token
    budget left (`max_num_batched_tokens`), and the pool's blocks for its tokens now (cached
    prefix blocks mapped, idle cached ones evictable), not for its longest possible answer.

    >>> pool = BlockPool(num_blocks=2, block_tokens=4)
    >>> _ = pool.allocate(0, range(8))  # a running request holds both blocks
    >>> admission(pool, range(6), rows=1, max_rows=8, budget_left=64)
    'no free block'
    >>> _ = pool.release(0)
    >>> admission(pool, range(6), rows=0, max_rows=8, budget_left=64)
    ''
    """
    if rows >= max_rows:
        return WAIT_ROWS
    if budget_left <= 0:
        return WAIT_BUDGET
    if not pool.can_allocate(len(tokens), pool.cached_prefix(tokens)):
        return WAIT_BLOCKS
    return ""


def split_budget(rows: Iterable[tuple[int, bool, int]], budget: int
                 ) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """Split a step's token budget: one token for every decoding row, the rest to the rows
    mid-prefill, oldest first, a chunk each (0 = no budget: whole prompts).
    `rows`: (rid, decoding, prompt tokens still pending), in admission order.
    -> (rows that decode, (rid, prompt tokens it computes now) per prefilling row).

    >>> split_budget([(0, True, 0), (1, False, 300), (2, False, 40)], budget=256)
    ((0,), ((1, 255),))
    >>> split_budget([(0, True, 0), (1, False, 300)], budget=0)
    ((0,), ((1, 300),))
    """
    rows = list(rows)
    decode = tuple(rid for rid, decoding, _ in rows if decoding)
    left, chunks = (budget - len(decode) if budget else float("inf")), []
    for rid, decoding, pending in rows:
        if not decoding and left > 0:
            chunks.append((rid, int(min(pending, left))))
            left -= chunks[-1][1]
    return decode, tuple(chunks)


@dataclass(frozen=True)
class StepPlan:
    """One step's schedule, decided before any forward pass (vLLM's `SchedulerOutput`)."""

    index: int  # the step's number since start
    decode: tuple[int, ...]  # rows that feed one token each (their prompt is all computed)
    chunks: tuple[tuple[int, int], ...]  # (rid, prompt tokens it computes now), oldest first
    preempted: tuple[int, ...] = ()  # rows sent back to the queue for room, newest first
    admitted: tuple[int, ...] = ()  # requests that joined the batch at this step
    budget: int = 0  # the step's token budget (0 = whole prompts)
    waiting: str = ""  # why the queue's first request did not join ("" when none waits)

    @property
    def tokens(self) -> int:
        """Tokens the step's forward passes compute (what the budget limits)."""
        return len(self.decode) + sum(n for _, n in self.chunks)
