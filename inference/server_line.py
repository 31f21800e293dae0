"""The server's waiting line, fair by visitor: requests join the batch round robin across
visitors (start-time fair queuing), so a visitor who queues 100 chats delays another's one chat
by at most one of theirs per turn, not by the whole flood.

Each request's turn is one past its visitor's newest turn still waiting, never before the turn
being served now (`served`), so turns are not saved up by waiting idle. The line is ordered by
(turn, arrival). A preempted request goes back to the FRONT: it had been admitted already. A
request with no visitor key (`""`) is a visitor of its own (first come, first served).

>>> class R:
...     def __init__(self, rid, visitor): self.rid, self.visitor = rid, visitor
>>> line = WaitingLine()
>>> for rid, who in enumerate("AAAABCC"):
...     _ = line.add(R(rid, who))
>>> [f"{r.visitor}{r.rid}" for r in line]
['A0', 'B4', 'C5', 'A1', 'C6', 'A2', 'A3']
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator


class WaitingLine:
    """Requests waiting for a row, in the order they may join (call under the server's lock).
    A request needs `rid` (arrival order), `visitor` and `cancelled`; the line sets `turn`."""

    def __init__(self) -> None:
        self._line: list = []
        self.served = 0  # the newest turn a request joined the batch at

    def add(self, req) -> int:
        """Queue a new request at its visitor's next turn. -> requests now ahead of it."""
        newest = max((r.turn for r in self._line if req.visitor and r.visitor == req.visitor),
                     default=0)
        req.turn = max(newest, self.served) + 1
        key = (req.turn, req.rid)
        i = len(self._line)
        while i and (self._line[i - 1].turn, self._line[i - 1].rid) > key:
            i -= 1
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

    def clear(self) -> None:
        self._line.clear()

    def waiting(self, visitor: str) -> int:
        """This visitor's requests in the line, less those stopped (0 for the anonymous `""`)."""
        return sum(1 for r in self._line if visitor and r.visitor == visitor and not r.cancelled)

    def __iter__(self) -> Iterator:
        return iter(list(self._line))  # a copy: callers remove as they go

    def __len__(self) -> int:
        return len(self._line)
