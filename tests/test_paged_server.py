"""The server's paged KV cache on the real model: every request gets its solo tokens (greedy
and seeded) while others join and leave; a prefix-cache hit gives the same tokens as a miss;
a preempted request resumes with the same tokens; shared blocks are reference counted, idle
cached blocks are evicted when the pool needs room, no block leaks, and a request too large
for the pool is told so."""

import pytest

from inference.config import Settings
from inference.errors import RequestTooLargeError, ServerStoppedError
from inference.generation import stream
from inference.sampling import SamplingSettings
from inference.server import Server
from inference.tokens import prompt_ids
from polling import wait_for

TEACHER = ("You are the teaching assistant of a class on how language models are served. "
           "Answer in one short sentence, plainly, for a beginner.")
SEEDED = SamplingSettings(temperature=0.9, top_k=40, seed=5)


def solo(lm, ids, sampling, n):
    return [e.token_id for e in stream(lm, ids, sampling, n)]




def tokens(req):
    return [e.token_id for e in req.events()]


@pytest.fixture
def paged(lm, request):
    blocks = getattr(request, "param", 0)
    srv = Server(lm, Settings(server_rows=8, block_tokens=16,
                              server_pool_blocks=blocks))
    yield srv
    srv.close()


def pool_idle(srv):
    st = srv.stats()
    return st.active == 0 and st.pool.blocks_used == 0 and not st.pool.requests


def test_paged_solo_tokens_greedy_and_seeded_across_joins_and_leaves(lm, paged):
    asks = ["Name three planets.", "Write a haiku about tea.", "What is 2 + 2?",
            "Explain why the sky is blue in two sentences."]
    ids = [prompt_ids(lm.tokenizer, a) for a in asks]
    plan = [(SamplingSettings(), 14), (SEEDED, 5), (SamplingSettings(), 9), (SEEDED, 12)]
    expected = [solo(lm, i, s, n) for i, (s, n) in zip(ids, plan)]
    first = [paged.submit(ids[k], *plan[k]) for k in (0, 1)]
    head = first[0].events()
    got0 = [next(head).token_id for _ in range(3)]  # 0 and 1 are running; 1 leaves early
    late = [paged.submit(ids[k], *plan[k]) for k in (2, 3)]  # these join mid-way
    got0 += [e.token_id for e in head]
    assert [got0, tokens(first[1])] + [tokens(r) for r in late] == expected
    assert max(first[0].rows_per_step) >= 2
    assert wait_for(lambda: pool_idle(paged))  # every block back: none leaked


def test_prefix_cache_hit_gives_the_same_tokens_as_a_miss(lm, paged):
    ids_a = prompt_ids(lm.tokenizer, "What is a KV cache?", system=TEACHER)
    ids_b = prompt_ids(lm.tokenizer, "What is a block table?", system=TEACHER)
    miss = tokens(paged.submit(ids_a, max_new_tokens=10))
    assert wait_for(lambda: pool_idle(paged))
    before = paged.stats().pool
    assert before.blocks_cached_idle >= 2  # the finished request's full blocks stay cached
    hit_b = paged.submit(ids_b, SEEDED, 10)
    got_b = tokens(hit_b)
    hit_a = tokens(paged.submit(ids_a, max_new_tokens=10))
    after = paged.stats().pool
    shared = sum(1 for x, y in zip(ids_a, ids_b) if x == y)  # the teacher's prefix
    assert after.prefix_hit_tokens - before.prefix_hit_tokens >= 2 * (shared // 16 * 16)
    assert after.prefill_skipped_pct > 0
    assert hit_a == miss
    assert got_b == solo(lm, ids_b, SEEDED, 10)


def test_prefix_cache_refcounts_shared_blocks_while_both_run(lm, paged):
    ids_a = prompt_ids(lm.tokenizer, "Write a long poem about the sea.", system=TEACHER)
    ids_b = prompt_ids(lm.tokenizer, "Write a long poem about the moon.", system=TEACHER)
    a = paged.submit(ids_a, max_new_tokens=200)
    events_a = a.events()
    next(events_a)  # a is prefilled: its prompt's full blocks are keyed
    b = paged.submit(ids_b, max_new_tokens=200)
    assert wait_for(lambda: len(paged.stats().pool.requests) == 2)
    with paged.turns.exclusive():  # nothing runs while we read
        pool = paged.stats().pool
    ra, rb = pool.requests
    common = 0
    while ra.block_table[common] == rb.block_table[common]:
        common += 1
    assert common >= 2 and rb.prefix_hit_tokens == common * 16
    assert ra.shared_blocks == rb.shared_blocks == common and pool.blocks_shared == common
    assert pool.paged_bytes < pool.real_bytes  # shared blocks are stored once
    a.cancel()
    b.cancel()
    assert wait_for(lambda: pool_idle(paged))
    assert paged.stats().pool.blocks_cached_idle >= common


@pytest.mark.parametrize("paged", [8], indirect=True)
def test_preempt_then_resume_gives_the_solo_tokens(lm, paged):
    # two ~35-token prompts (3 blocks each) growing to ~75 tokens (5 blocks each), sharing
    # their first block (the chat template's system prompt): 5 + 4 > 8
    ids_a = prompt_ids(lm.tokenizer, "Tell me a long story about a lighthouse keeper.")
    ids_b = prompt_ids(lm.tokenizer, "Describe the water cycle step by step.")
    exp_a = solo(lm, ids_a, SamplingSettings(), 40)
    exp_b = solo(lm, ids_b, SEEDED, 40)
    if exp_a[-1] in lm.stop_ids or exp_b[-1] in lm.stop_ids:
        pytest.skip("an answer ended early: the pool would not fill")
    with paged.turns.exclusive():  # b starts a step later, mapping the block a computed
        a = paged.submit(ids_a, max_new_tokens=40)
        b = paged.submit(ids_b, SEEDED, 40)
    got_a, got_b = tokens(a), tokens(b)
    assert b.preemptions >= 1 and a.preemptions == 0  # the newest one was preempted
    assert paged.stats().pool.preemptions >= 1
    assert got_a == exp_a and got_b == exp_b
    assert wait_for(lambda: pool_idle(paged))


@pytest.mark.parametrize("paged", [6], indirect=True)
def test_prefix_cache_evicts_an_idle_block_when_the_pool_needs_room(lm, paged):
    ids_a = prompt_ids(lm.tokenizer, "What is a KV cache?", system=TEACHER)  # 4+ blocks
    tokens(paged.submit(ids_a, max_new_tokens=2))
    assert wait_for(lambda: pool_idle(paged))
    idle = paged.stats().pool.blocks_cached_idle
    assert idle >= 3
    ids_c = prompt_ids(lm.tokenizer, "Name a colour. " * 5)  # another system turn: no hit
    expected = solo(lm, ids_c, SamplingSettings(), 12)
    assert tokens(paged.submit(ids_c, max_new_tokens=12)) == expected
    pool = paged.stats().pool
    assert pool.evictions >= 1
    assert wait_for(lambda: pool_idle(paged))


@pytest.mark.parametrize("paged", [4], indirect=True)
def test_paged_request_too_large_for_the_pool_gets_its_message(lm, paged):
    ids = prompt_ids(lm.tokenizer, "Name three planets.")
    with pytest.raises(RequestTooLargeError, match=r"holds only 4 blocks"):
        paged.submit(ids, max_new_tokens=48)
    assert len(tokens(paged.submit(ids, max_new_tokens=8))) == 8  # a fitting one is served


def test_paged_failed_step_is_logged_with_its_trace_and_blocks_return(lm, paged, caplog):
    feed = paged.batch.feed

    def broken(chunks):  # the next decode pass fails
        if all(paged.batch.rows[rid].decoding for rid in chunks):
            raise RuntimeError("simulated kernel failure")
        return feed(chunks)

    paged.batch.feed = broken
    req = paged.submit(prompt_ids(lm.tokenizer, "Name three planets."), max_new_tokens=8)
    with caplog.at_level("ERROR", logger="inference.server"):
        with pytest.raises(ServerStoppedError, match="please try again"):
            tokens(req)
        assert wait_for(lambda: any(r.exc_info for r in caplog.records))
    record = next(r for r in caplog.records if r.exc_info)
    assert "simulated kernel failure" in str(record.exc_info[1])
    assert wait_for(lambda: pool_idle(paged))


def test_a_class_at_once_computes_the_shared_system_prompt_once(lm):
    """Everyone presses Generate together: the chats share the chat template's first blocks.
    The first request computes them; the others wait one step and map them (prefix hits)
    instead of computing the same block side by side, a request with another system prompt
    behind them goes ahead at once, and every one gets its solo tokens."""
    from bench.paged import class_prompts

    prompts = class_prompts(lm.tokenizer, 5) + [prompt_ids(lm.tokenizer, "Hi.", system=TEACHER)]
    srv = Server(lm, Settings(server_steps_kept=1_000))
    try:
        with srv.turns.exclusive():
            reqs = [srv.submit(p, SamplingSettings(), 6) for p in prompts]
        got = [[e.token_id for e in r.events()] for r in reqs]
        steps = srv.stats().steps_detail
        hits = srv.stats().pool.prefix_hit_tokens
    finally:
        srv.close()
    bt = Settings().block_tokens
    common = next(i for i in range(len(prompts[0])) if len({p[i] for p in prompts[:5]}) > 1)
    assert common >= bt  # the chat template's system prompt fills at least one block
    assert hits >= 4 * (common // bt * bt)  # computed once, mapped by the other four
    # the other prompt: at once
    assert set(dict(steps[0].plan.chunks)) == {reqs[0].rid, reqs[5].rid}
    for p, tokens in zip(prompts, got):
        assert tokens == solo(lm, p, SamplingSettings(), 6)
