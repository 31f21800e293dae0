"""The server's line is fair by visitor, on the real model: a visitor flooding the line delays
another visitor's request by at most one of the flood's per turn, every request still gets
exactly its solo tokens, a visitor past `Settings.visitor_chats` is refused with a message,
and a stream nobody reads is stopped with its row freed (on a clock the test moves)."""
from __future__ import annotations

import threading

import pytest

from inference.config import LIMITS, Settings
from inference.errors import ServerBusyError, ServerStoppedError
from inference.generation import stream
from inference.sampling import SamplingSettings
from inference.server import Server
from inference.server_plan import WaitingLine
from inference.tokens import prompt_ids
from polling import wait_for

PROMPTS = [LIMITS.default_prompt, "Name three planets.", "Write a haiku about tea.",
           "What is 2 + 2?"]


def solo(lm, ids, n):
    return [e.token_id for e in stream(lm, ids, SamplingSettings(), n)]


class Asked:
    def __init__(self, rid: int, visitor: str) -> None:
        self.rid, self.visitor, self.turn, self.cancelled = rid, visitor, 0, False


def test_fair_line_takes_visitors_in_turn_and_preempted_first():
    line = WaitingLine()
    asked = [Asked(rid, who) for rid, who in enumerate("AAAAB")]
    places = [line.add(r) for r in asked]
    assert places[-1] == 1  # B's one request is second, behind A's first only
    assert [r.rid for r in line] == [0, 4, 1, 2, 3]
    first = next(iter(line))
    line.take(first)  # A0 joins the batch: turn 1 is being served
    line.add(Asked(5, "C"))  # a latecomer joins the current turn, not the end of the flood
    line.add(Asked(6, ""))  # so does an anonymous request (a visitor of its own)
    assert [r.rid for r in line] == [4, 1, 5, 6, 2, 3]
    line.put_back([first])  # preempted: back at the front, ahead of every turn
    assert [r.rid for r in line][:2] == [0, 4]
    assert line.waiting("A") == 4 and line.waiting("") == 0
    asked[1].cancelled = True  # Stop: no longer counted against its visitor
    assert line.waiting("A") == 3


def test_fair_flood_lets_another_visitor_in_at_the_first_turn_with_solo_tokens(lm):
    srv = Server(lm, Settings(server_rows=2, visitor_chats=16, unread_stream_s=0))
    try:
        ids = [prompt_ids(lm.tokenizer, p) for p in PROMPTS]
        with srv.turns.exclusive():  # the flood is all in line before the first step
            flood = [srv.submit(ids[k % 3], None, 6, visitor="flood") for k in range(8)]
            other = srv.submit(ids[3], None, 6, visitor="other")
        assert other.ahead == 1
        got = {r.rid: [e.token_id for e in r.events()] for r in [other, *flood]}
        # admission order: the flood's first, then the other visitor's, then the flood's rest
        order = sorted([other, *flood], key=lambda r: r.admitted)
        assert [r.rid for r in order[:3]] == [flood[0].rid, other.rid, flood[1].rid]
        assert got[other.rid] == solo(lm, ids[3], 6)
        for k, r in enumerate(flood):
            assert got[r.rid] == solo(lm, ids[k % 3], 6)
    finally:
        srv.close()


def test_fair_visitor_cap_refuses_past_it_with_a_message(lm):
    srv = Server(lm, Settings(server_rows=4, visitor_chats=2, unread_stream_s=0))
    try:
        ids = prompt_ids(lm.tokenizer, PROMPTS[3])
        with srv.turns.exclusive():
            mine = [srv.submit(ids, None, 3, visitor="10.0.0.7") for _ in range(2)]
            with pytest.raises(ServerBusyError, match="You already have 2 answers running or "
                                                      "waiting"):
                srv.submit(ids, None, 3, visitor="10.0.0.7")
            theirs = srv.submit(ids, None, 3, visitor="10.0.0.8")  # another visitor's share
            anon = [srv.submit(ids, None, 3) for _ in range(3)]  # no key: never capped
            mine[0].cancel()  # Stop frees a place at once
            again = srv.submit(ids, None, 3, visitor="10.0.0.7")
        expected = solo(lm, ids, 3)
        for r in [mine[1], theirs, again, *anon]:
            assert [e.token_id for e in r.events()] == expected
    finally:
        srv.close()


class FakeClock:
    def __init__(self) -> None:
        self.now, self._lock = 1_000.0, threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def advance(self, s: float) -> None:
        with self._lock:
            self.now += s


def test_fair_unread_stream_is_stopped_and_its_row_freed(lm):
    clock = FakeClock()
    srv = Server(lm, Settings(server_rows=4, unread_stream_s=5), clock=clock)
    try:
        ids = prompt_ids(lm.tokenizer, PROMPTS[0])
        unread = srv.submit(ids, None, 400, visitor="gone")  # its client never reads
        assert wait_for(lambda: len(unread.generated) >= 4)  # unread, but under the limit
        assert not unread.cancelled and srv.stats().unread == 0
        clock.advance(6)
        assert wait_for(lambda: srv.stats().unread == 1 and srv.stats().active == 0)
        assert wait_for(lambda: srv.stats().pool.blocks_used == 0)  # its blocks went back
        made = len(unread.generated)
        assert 4 <= made < 400
        seen = []
        with pytest.raises(ServerStoppedError, match="nothing read it for 5 s"):
            for ev in unread.events():
                seen.append(ev.token_id)
        assert seen == unread.generated  # a returning reader gets what was made, then why
        # a stream that is read is served to its end on the same clock
        short = prompt_ids(lm.tokenizer, PROMPTS[1])
        read = srv.submit(short, None, 6, visitor="gone")
        assert [e.token_id for e in read.events()] == solo(lm, short, 6)
        assert srv.stats().unread == 1
    finally:
        srv.close()
