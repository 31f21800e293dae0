"""One server step's schedule, decided before any forward pass, as vLLM v1's scheduler: the
waiting line, fair by visitor (`WaitingLine`), who may join now (`admission`), how the step's
token budget splits (`split_budget`), and the frozen record of it (`StepPlan`). Bookkeeping only.
"""
from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from .block_pool import BlockPool

WAIT_ROWS, WAIT_BUDGET = "every row is taken", "the step's token budget is spent"
WAIT_BLOCKS, WAIT_SHARED = "no free block", "its prompt's next block is being computed"


def admission(pool: BlockPool, tokens: Sequence[int], rows: int, max_rows: int,
              budget_left: float) -> str:
    """Why a waiting request of these tokens cannot join now ("" when it can), as vLLM: a row
    under `max_rows`, some token budget left, and the pool's blocks for its tokens NOW (cached
    prefix blocks mapped, idle ones evictable), not for its longest possible answer.

    >>> pool = BlockPool(num_blocks=2, block_tokens=4)
    >>> _ = pool.allocate(0, range(8))  # a running request holds both blocks
    >>> admission(pool, range(6), rows=1, max_rows=8, budget_left=64)
    'no free block'
    >>> pool.release(0)
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
    """One token of the budget for every decoding row, the rest to the rows mid-prefill, oldest
    first, a chunk each (budget 0: whole prompts). `rows`: (rid, decoding, tokens pending) in
    admission order -> (rows that decode, (rid, tokens it computes now) per prefilling row).

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
    def prefill_tokens(self) -> int:
        return sum(n for _, n in self.chunks)

    @property
    def tokens(self) -> int:
        """Tokens the step's forward passes compute (what the budget limits)."""
        return len(self.decode) + self.prefill_tokens


class WaitingLine:
    """Requests waiting for a row, round robin by visitor (start-time fair queuing: one
    visitor's 100 chats delay another's one chat by one turn at most). A request's turn is one
    past its visitor's newest turn still waiting, never before the turn served now; the line is
    ordered by (turn, arrival). A preempted request goes back to the FRONT. The visitor `""` is
    a visitor of its own. Call under the server's lock.

    >>> class R:
    ...     def __init__(self, rid, visitor): self.rid, self.visitor = rid, visitor
    >>> line = WaitingLine()
    >>> for rid, who in enumerate("AAAABCC"):
    ...     _ = line.add(R(rid, who))
    >>> [f"{r.visitor}{r.rid}" for r in line]
    ['A0', 'B4', 'C5', 'A1', 'C6', 'A2', 'A3']
    """

    def __init__(self) -> None:
        self._line: list = []
        self.served = 0  # the newest turn a request joined the batch at

    def add(self, req) -> int:
        """Queue a new request at its visitor's next turn. -> requests now ahead of it."""
        newest = max((r.turn for r in self._line if req.visitor and r.visitor == req.visitor),
                     default=0)
        req.turn = max(newest, self.served) + 1
        i = bisect.bisect_right(self._line, (req.turn, req.rid), key=lambda r: (r.turn, r.rid))
        self._line.insert(i, req)
        return i

    def put_back(self, preempted: Iterable) -> None:
        """Preempted requests return to the front, newest first (the oldest ends first)."""
        for req in preempted:
            self._line.insert(0, req)

    def take(self, req) -> None:
        """`req` joins the batch: its turn is now being served."""
        self._line.remove(req)
        self.served = max(self.served, req.turn)

    def drop(self, req) -> None:
        """`req` leaves the line without being served (Stop, a closed tab)."""
        self._line.remove(req)

    def waiting(self, visitor: str) -> int:
        """This visitor's requests in the line, less those stopped (0 for the anonymous `""`)."""
        return sum(1 for r in self._line if visitor and r.visitor == visitor and not r.cancelled)

    def __iter__(self) -> Iterator:
        return iter(list(self._line))  # a copy: callers remove as they go

    def __len__(self) -> int:
        return len(self._line)
