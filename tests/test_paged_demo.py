"""Lesson 4's pages demo on the real model, a small private pool: a request takes the blocks
it needs, finishing frees them (full ones stay cached), two prompts with one prefix share
blocks, and filling the pool preempts the newest request, which resumes with its solo tokens."""
from inference.experiments.paged_demo import (
    add_request,
    add_shared_prefix,
    fill_pool,
    finish,
    start_pool,
    step_pool,
)
from inference.generation import stream
from inference.sampling import SamplingSettings


def test_paged_demo_add_step_finish(lm):
    demo, v = start_pool(lm, blocks=12)
    assert v.pool.blocks_free == 12 and not v.requests
    v = add_request(lm, demo, "Name a river.")
    r = v.requests[0]
    assert r.generated_tokens == 1 and v.pool.blocks_used == -(-r.prompt_tokens // 8)
    for _ in range(3):
        v = step_pool(lm, demo)
    assert v.requests[0].generated_tokens == 4 and v.seconds > 0
    used = v.pool.blocks_used
    v = finish(lm, demo)
    assert v.requests[0].state == "finished" and v.pool.blocks_used == 0
    assert v.pool.blocks_cached_idle == (r.prompt_tokens + 3) // 8  # its full blocks stay
    assert v.pool.blocks_cached_idle + v.pool.blocks_free == 12 and used > 0


def test_paged_demo_shared_prefix_shares_blocks(lm):
    demo, _ = start_pool(lm, blocks=24)
    v = add_shared_prefix(lm, demo, "You answer questions about cooking, in one line.",
                          "How long do eggs boil?", "How long does rice cook?")
    a, b = v.pool.requests
    assert b.prefix_hit_tokens >= 16 and v.pool.blocks_shared == b.prefix_hit_tokens // 8
    assert a.block_table[:2] == b.block_table[:2]


def test_paged_demo_fill_pool_preempts_and_resumes_with_solo_tokens(lm):
    demo, _ = start_pool(lm, blocks=12)
    v = fill_pool(lm, demo)
    assert v.pool.preemptions >= 1 and "preempted" in v.note
    waiting = [r for r in v.requests if r.state.startswith("waiting")]
    assert waiting
    rid = waiting[0].rid
    for other in list(demo.batch.rows):
        finish(lm, demo, other)  # make room: the preempted one resumes at the next step
    for _ in range(12):
        if rid in demo.finished or len(demo.generated[rid]) >= 12:
            break
        step_pool(lm, demo)
    got = demo.generated[rid]
    assert rid not in demo.waiting and len(got) >= 2
    expected = [e.token_id for e in stream(lm, demo.prompts[rid], SamplingSettings(), len(got))]
    assert got == expected
