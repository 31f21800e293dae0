"""The serving engine on the real model: every request, batched with strangers, gets exactly
the tokens it would get alone; cancel frees its row; a full queue says so; `exclusive()`
(tests and benchmarks filling the queue) pauses the batcher and in-flight requests finish
correctly afterwards."""

import pytest

from inference.config import LIMITS, Settings
from inference.errors import ServerBusyError, ServerStoppedError
from inference.generation import stream
from inference.sampling import SamplingSettings
from inference.server import Server
from inference.tokens import prompt_ids
from polling import wait_for

PROMPTS = [LIMITS.default_prompt, "Name three planets.",
           "Write a haiku about tea.", "What is 2 + 2?"]
SETTINGS = [SamplingSettings(), SamplingSettings(temperature=0.9, top_k=40, seed=3),
            SamplingSettings(temperature=1.2, top_p=0.9, seed=11), SamplingSettings()]


def solo(lm, ids, sampling, n):
    return [e.token_id for e in stream(lm, ids, sampling, n)]




@pytest.fixture
def batcher(lm):
    srv = Server(lm, Settings(server_rows=8, server_queue=3))
    yield srv
    srv.close()


def test_concurrent_requests_get_their_solo_tokens(lm, batcher):
    ids = [prompt_ids(lm.tokenizer, p) for p in PROMPTS]
    lengths = [12, 7, 10, 5]
    expected = [solo(lm, i, s, n) for i, s, n in zip(ids, SETTINGS, lengths)]
    # Two start together, two join while the first are mid-way.
    first = [batcher.submit(ids[k], SETTINGS[k], lengths[k]) for k in (0, 1)]
    got: dict[int, list[int]] = {}
    streams = {0: first[0].events(), 1: first[1].events()}
    for k in (0, 1):
        got[k] = [next(streams[k]).token_id for _ in range(3)]
    late = {k: batcher.submit(ids[k], SETTINGS[k], lengths[k]) for k in (2, 3)}
    for k in (0, 1):
        got[k] += [e.token_id for e in streams[k]]
    for k, req in late.items():
        got[k] = [e.token_id for e in req.events()]
    assert [got[k] for k in range(4)] == expected
    assert max(first[0].rows_per_step) >= 2  # it really shared forward passes


def test_cancel_frees_the_row_and_others_finish(lm, batcher):
    a = batcher.submit(prompt_ids(lm.tokenizer, PROMPTS[0]), max_new_tokens=200)
    b_ids = prompt_ids(lm.tokenizer, PROMPTS[1])
    b = batcher.submit(b_ids, max_new_tokens=8)
    events = a.events()
    next(events)
    events.close()  # the visitor leaves: generator closed, request cancelled
    assert a.cancelled
    assert wait_for(lambda: batcher.stats().active <= 1)
    assert [e.token_id for e in b.events()] == solo(lm, b_ids, SamplingSettings(), 8)
    assert wait_for(lambda: batcher.stats().active == 0)
    assert len(a.generated) < 200


def test_full_queue_gives_a_message_then_serves(lm, batcher):
    ids = prompt_ids(lm.tokenizer, PROMPTS[3])
    with batcher.turns.exclusive():  # hold the loop so the queue fills
        held = [batcher.submit(ids, max_new_tokens=2) for _ in range(3)]
        with pytest.raises(ServerBusyError, match="3 requests are ahead of you"):
            batcher.submit(ids, max_new_tokens=2)
    for r in held:
        assert len(list(r.events())) == 2
    assert len(list(batcher.submit(ids, max_new_tokens=2).events())) == 2


def test_exclusive_pauses_and_in_flight_requests_finish_correctly(lm, batcher):
    ids = prompt_ids(lm.tokenizer, PROMPTS[0])
    expected = solo(lm, ids, SETTINGS[1], 16)
    req = batcher.submit(ids, SETTINGS[1], 16)
    events = req.events()
    head = [next(events).token_id for _ in range(4)]
    with batcher.turns.exclusive():
        steps = batcher.stats().steps
        alone = solo(lm, prompt_ids(lm.tokenizer, PROMPTS[2]), SamplingSettings(), 4)
        assert batcher.stats().steps == steps  # nothing ran beside the measurement
        assert batcher.stats().paused
    assert len(alone) == 4
    assert head + [e.token_id for e in events] == expected


def test_a_waiting_request_ticks_and_leaving_at_a_tick_cancels_it(lm, batcher):
    ids = prompt_ids(lm.tokenizer, PROMPTS[3])
    with batcher.turns.exclusive():  # no step runs: the request waits in the queue
        req = batcher.submit(ids, max_new_tokens=40)
        events = req.events(idle_s=0.05)
        assert next(events) is None and next(events) is None  # ticks instead of blocking
        events.close()  # a Stop at a tick
        assert req.cancelled
    assert wait_for(lambda: batcher.stats().queued == 0)
    assert req.generated == []  # it never took a row
    with pytest.raises(ServerStoppedError, match="did not answer in time"):
        with batcher.turns.exclusive():
            list(batcher.submit(ids, max_new_tokens=2).events(timeout_s=0.3, idle_s=0.1))
    later = batcher.submit(ids, max_new_tokens=3)
    tokens = [e for e in later.events(idle_s=0.05) if e is not None]
    assert [e.token_id for e in tokens] == solo(lm, ids, SamplingSettings(), 3)


def test_stats_report_rows_and_throughput(lm, batcher):
    reqs = [batcher.submit(prompt_ids(lm.tokenizer, p), max_new_tokens=6) for p in PROMPTS[:3]]
    for r in reqs:
        list(r.events())
    assert wait_for(lambda: batcher.stats().served >= 3)  # finished rows leave at the next step
    st = batcher.stats()
    assert st.steps >= 6 and st.tokens_per_s > 0 and st.active == 0
    assert max(rows for _, rows, _ in st.history) >= 2
    assert all(r.mean_batch_rows >= 1 for r in reqs)
