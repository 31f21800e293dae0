"""Chunked prefill in the paged server, on the real model: a long prompt (~600 tokens, budget
128, so several chunks) among short ones gives every request its solo tokens, greedy and
seeded; the running stream gets a token in every step while the long prompt is chunked (read
from the step records, not the clock); no step computes more than its budget; a prefix-cache
hit still skips its blocks; the pool is empty after all end."""
import pytest

from inference.config import Settings
from inference.errors import SettingOutOfRangeError
from inference.sampling import SamplingSettings
from inference.server import Server
from inference.tokens import prompt_ids
from test_paged_server import SEEDED, pool_idle, solo, tokens, wait_for

BUDGET = 128


def long_ask(lm, n=600):
    """A real prompt of about `n` tokens (numbered sentences, then a question)."""
    body = " ".join(f"Fact {i}: the {i}th lamp in the hall is lit." for i in range(n // 12))
    ids = prompt_ids(lm.tokenizer, body + " Which lamp is lit first?")
    assert len(ids) >= n - 60
    return ids


@pytest.fixture
def chunked(lm):
    srv = Server(lm, Settings(server_rows=8, block_tokens=16,
                              step_token_budget=BUDGET))
    yield srv
    srv.close()


def test_chunked_solo_tokens_greedy_and_seeded_long_among_short(lm, chunked):
    short = [prompt_ids(lm.tokenizer, a) for a in ("Name three planets.", "What is 2 + 2?")]
    long_ids = long_ask(lm)
    plan = [(short[0], SamplingSettings(), 24), (long_ids, SamplingSettings(), 6),
            (short[1], SEEDED, 10), (long_ids, SEEDED, 5)]
    expected = [solo(lm, ids, s, n) for ids, s, n in plan]
    first = chunked.submit(*plan[0])
    got0 = []
    events = first.events()
    got0.append(next(events).token_id)  # the short stream is running before the rest arrive
    rest = [chunked.submit(*p) for p in plan[1:]]
    got0 += [e.token_id for e in events]
    got = [got0] + [tokens(r) for r in rest]
    assert got == expected
    assert wait_for(lambda: pool_idle(chunked))
    steps = chunked.stats().steps_detail
    assert all(s.plan.tokens <= BUDGET for s in steps)
    assert max(s.plan.prefill_tokens for s in steps) > 0
    # the first long prompt took several chunks; the second, the same prompt, waited for its
    # blocks and mapped them (computed once)
    assert sum(1 for s in steps if s.plan.chunks) >= len(long_ids) // BUDGET
    assert chunked.stats().pool.prefix_hit_tokens >= (len(long_ids) - 1) // 16 * 16


def test_chunked_long_newcomer_never_stalls_a_running_stream(lm, chunked):
    plans, schedule = [], chunked._schedule
    chunked._schedule = lambda: plans.append(schedule()) or plans[-1]  # looked up every step
    ask = prompt_ids(lm.tokenizer, "Count from one to forty.")
    runner = chunked.submit(ask, SamplingSettings(), 40)
    events = runner.events()
    got = [next(events).token_id]
    long_ids = long_ask(lm)
    newcomer = chunked.submit(long_ids, SamplingSettings(), 4)
    got += [e.token_id for e in events]
    assert got == solo(lm, ask, SamplingSettings(), 40)
    first = list(newcomer.events())[0]
    # each step's plan: decoding rows first, the budget's rest as the newcomer's chunks, until
    # its uncached prompt is computed; then it decodes; `last_plan` is the newest
    chunks = [n for p in plans for rid, n in p.chunks if rid == newcomer.rid]
    assert sum(chunks) == first.forward_tokens > len(long_ids) - 2 * 16
    assert all(p.tokens <= BUDGET for p in plans)
    assert all(runner.rid in p.decode for p in plans if newcomer.rid in dict(p.chunks))
    assert not any(newcomer.rid in p.decode and newcomer.rid in dict(p.chunks) for p in plans)
    assert chunked.last_plan == plans[-1]
    steps = chunked.stats().steps_detail
    long_steps = [s for s in steps if newcomer.rid in dict(s.plan.chunks)]
    assert len(long_steps) >= 4  # ~600 tokens in 128-token steps
    for s in long_steps:  # every step that chunked the long prompt also decoded the runner
        assert runner.rid in s.plan.decode
        assert s.plan.tokens <= BUDGET
    assert long_steps[-1].first_tokens == 1  # its first token came with its last chunk
    assert all(s.forward_s > 0 and s.total_s >= s.forward_s for s in long_steps)
    assert wait_for(lambda: pool_idle(chunked))


def test_a_newcomer_waits_while_the_steps_budget_is_spent_then_joins(lm, chunked):
    from inference.server_plan import WAIT_BUDGET

    plans, schedule = [], chunked._schedule
    chunked._schedule = lambda: plans.append(schedule()) or plans[-1]
    long_ids = long_ask(lm, 400)
    short = prompt_ids(lm.tokenizer, "Name three planets.", system="Answer in one word.")
    with chunked.turns.exclusive():
        big, small = (chunked.submit(long_ids, SamplingSettings(), 3),
                      chunked.submit(short, SEEDED, 5))
    assert (tokens(big), tokens(small)) == (solo(lm, long_ids, SamplingSettings(), 3),
                                            solo(lm, short, SEEDED, 5))
    # the long prompt took the whole budget: the short one waited, told why, then joined
    assert plans[0].admitted == (big.rid,) and plans[0].waiting == WAIT_BUDGET
    joined = next(p for p in plans if small.rid in p.admitted)
    assert joined.index > 0 and all(p.tokens <= BUDGET for p in plans)
    assert chunked.last_plan.waiting == ""  # nobody waits now


def test_chunked_prefix_hit_still_skips_blocks(lm, chunked):
    ids = long_ask(lm, 300)
    miss = list(chunked.submit(ids, SamplingSettings(), 3).events())
    before = chunked.stats().pool.prefix_hit_tokens
    again = chunked.submit(ids, SamplingSettings(), 3)
    hits = list(again.events())
    assert [e.token_id for e in hits] == [e.token_id for e in miss]
    hit = chunked.stats().pool.prefix_hit_tokens - before
    assert hit >= len(ids) - 2 * 16  # all but the last (partial) blocks were mapped
    # the first token's record says what its prefill computed, cached and in how many passes
    assert (miss[0].forward_tokens, miss[0].prefix_cached_tokens) == (len(ids), 0)
    assert miss[0].prefill_passes == -(-len(ids) // BUDGET)  # alone: budget-sized chunks
    assert (hits[0].forward_tokens, hits[0].prefix_cached_tokens) == (len(ids) - hit, hit)
    assert hits[0].prefill_passes == 1
    chunk = [s.plan.prefill_tokens for s in chunked.stats().steps_detail
             if again.rid in dict(s.plan.chunks)]
    assert sum(chunk) == len(ids) - hit
    assert wait_for(lambda: pool_idle(chunked))


def test_chunked_budget_zero_prefills_whole_prompts(lm):
    srv = Server(lm, Settings(server_rows=4, step_token_budget=0))
    try:
        ids = long_ask(lm, 300)
        assert tokens(srv.submit(ids, SamplingSettings(), 3)) == solo(lm, ids,
                                                                       SamplingSettings(), 3)
        first = srv.stats().steps_detail[0]
        assert first.plan.prefill_tokens == len(ids) and first.plan.budget == 0
    finally:
        srv.close()
    with pytest.raises(SettingOutOfRangeError):
        Server(lm, Settings(server_rows=8, step_token_budget=8))
