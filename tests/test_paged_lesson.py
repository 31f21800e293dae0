"""Lesson 4b (KV pages) on the real model: each handler returns a frame whose drawn numbers are
its small pool's own (cells per request, shared ⧉ cells, bytes, preemptions); bad input gets a
sentence; the live server view draws a streaming chat's blocks and lets them go when it ends."""
import re
import time

import pytest

from inference.config import LIMITS
from inference.errors import EmptyPromptError, NotReadyError
from inference.tokens import prompt_ids
from lessons import pages_handlers as run
from visualizations.server_view import SHARED_MARK, server_pool_parts


def cells(grid: str, kind: str) -> int:
    return grid.count(f"data-kind='{kind}'")


def mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def test_paged_lesson_add_step_finish_draws_the_pools_numbers(lm):
    f = run.add(lm, LIMITS, None, 12, "Name a river.")  # no pool yet: one starts
    pool = f.view.pool
    (r,) = pool.requests
    assert pool.blocks_total == 12 and pool.blocks_used == len(r.block_table) > 0
    assert cells(f.grid, "request 0") == len(r.block_table)
    assert cells(f.grid, "free") == pool.blocks_free == 12 - len(r.block_table)
    assert str(list(r.block_table)) in f.story and f"{r.tokens} prompt tokens" in f.story
    assert mb(pool.padded_bytes) in f.bytes_md and mb(pool.paged_bytes) in f.bytes_md
    demo = f.pool
    for _ in range(LIMITS.paged_demo_block_tokens):  # one block's worth: a new block is taken
        f = run.step_all(lm, demo)
    (r2,) = f.view.pool.requests
    assert len(r2.block_table) == len(r.block_table) + 1 and r2.tokens == r.tokens + 8
    assert cells(f.grid, "request 0") == len(r2.block_table) and "decode step" in f.story
    assert f.view.seconds > 0 and "ms, measured" in f.story
    f = run.finish_oldest(lm, demo)
    pool = f.view.pool
    assert pool.blocks_used == 0 and not pool.requests and "finished" in f.story
    assert pool.blocks_cached_idle == r2.tokens // 8  # its full blocks stay cached
    assert cells(f.grid, "cached, idle (kept for its prefix)") == pool.blocks_cached_idle
    assert pool.blocks_cached_idle + pool.blocks_free == 12
    run.forget(demo)


def test_paged_lesson_shared_prefix_marks_shared_blocks(lm):
    f = run.shared_prefix(lm, LIMITS, None, 24)
    pool = f.view.pool
    a, b = pool.requests
    shared = set(a.block_table) & set(b.block_table)
    assert shared and pool.blocks_shared == len(shared) == b.shared_blocks
    assert f.grid.count(f">{SHARED_MARK}</span>") == len(shared)
    assert f"{b.prefix_hit_tokens} of them mapped from cached blocks" in f.story
    assert f"**{pool.prefix_hit_tokens:,}** prompt tokens mapped" in f.bytes_md


def test_paged_lesson_fill_the_pool_preempts(lm):
    f = run.fill(lm, LIMITS, None, 12)
    pool = f.view.pool
    assert pool.preemptions >= 1 and "preempted" in f.story
    assert f"**{pool.preemptions:,}** preemptions" in f.bytes_md
    waiting = [r for r in f.view.requests if r.state.startswith("waiting")]
    assert waiting and all(w.rid not in {r.rid for r in pool.requests} for w in waiting)
    assert sum(cells(f.grid, f"request {r.rid}") for r in pool.requests) + \
        cells(f.grid, "free") + cells(f.grid, "cached, idle (kept for its prefix)") + \
        f.grid.count(f">{SHARED_MARK}</span>") == 12


def test_paged_lesson_bad_input_and_empty_state_get_a_sentence(lm):
    first = run.frame()
    assert "Add request" in first.story and first.view is None
    with pytest.raises(EmptyPromptError):
        run.add(lm, LIMITS, None, 12, "   ")
    with pytest.raises(NotReadyError, match="Add a request first"):
        run.step_all(lm, None)
    with pytest.raises(NotReadyError, match="No request is running"):
        run.finish_oldest(lm, run.new_pool(lm, LIMITS, 8).pool)
    with pytest.raises(Exception, match="Blocks in the pool"):
        run.new_pool(lm, LIMITS, 10_000)
    too_long = " ".join(["word"] * 200)
    with pytest.raises(Exception, match="more than the whole pool holds"):
        run.add(lm, LIMITS, None, 4, too_long)


def test_paged_server_view_draws_a_streaming_chats_blocks(lm, serving):
    req = serving.submit(prompt_ids(lm.tokenizer, "Count from one to twenty."),
                         max_new_tokens=24)
    seen = []
    for _ in req.events():
        st = serving.stats()
        mine = [r for r in st.pool.requests if r.rid == req.rid]
        if mine:
            grid, tables, md = server_pool_parts(st)
            seen.append(len(mine[0].block_table))
            assert cells(grid, f"request {req.rid}") + sum(
                1 for b in mine[0].block_table if re.search(
                    rf"data-block='{b}' data-kind='shared by requests", grid)) \
                == len(mine[0].block_table)
            assert f"request {req.rid}</span>" in tables
            assert mb(st.pool.paged_bytes) in md
    assert seen, "the chat's blocks never showed while it streamed"
    deadline = time.monotonic() + 30
    while any(r.rid == req.rid for r in serving.stats().pool.requests):
        assert time.monotonic() < deadline, "its blocks were not given back"
        time.sleep(0.05)
    grid, _, _ = server_pool_parts(serving.stats())
    assert cells(grid, f"request {req.rid}") == 0
