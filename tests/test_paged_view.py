"""The pool view draws what the record says: one cell per block in its state, the block
tables, the padded and paged byte figures with their waste, and an empty state (pure)."""
import re

from inference.paged_batch import PoolStats, RequestBlocks
from visualizations.server_view import (
    EMPTY,
    SHARED_MARK,
    block_tables_html,
    pool_bytes_md,
    pool_grid_html,
)


def record(**kw):
    base = dict(block_tokens=16, block_bytes=737_280, blocks_total=8, blocks_used=4,
                blocks_cached_idle=1, blocks_free=3, blocks_shared=1,
                requests=(RequestBlocks(0, 40, (0, 1, 2), 1, 0),
                          RequestBlocks(1, 20, (0, 3), 1, 16)),
                idle_blocks=(5,), real_bytes=60 * 46_080, filled_bytes=44 * 46_080,
                padded_bytes=2 * 40 * 46_080, paged_bytes=4 * 737_280,
                prefix_hit_tokens=16, prefill_tokens=44, preemptions=2, evictions=3)
    base.update(kw)
    return PoolStats(**base)


def test_paged_view_draws_one_cell_per_block_in_its_state():
    out = pool_grid_html(record(), caption="Measured live on cpu")
    kinds = re.findall(r"data-block='(\d+)' data-kind='([^']*)'", out)
    assert [int(b) for b, _ in kinds] == list(range(8))
    kind = dict((int(b), k) for b, k in kinds)
    assert kind[0] == "shared by requests 0, 1" and kind[1] == kind[2] == "request 0"
    assert kind[3] == "request 1" and kind[5].startswith("cached, idle")
    assert [b for b, k in kind.items() if k == "free"] == [4, 6, 7]
    assert out.count(f">{SHARED_MARK}</span>") == 1
    assert "<b>8</b> blocks of 16 tokens" in out and "<b>3</b> free" in out
    assert "Measured live on cpu" in out


def test_paged_view_block_tables_mark_shared_blocks():
    out = block_tables_html(record())
    assert f"[0{SHARED_MARK} 1 2]" in out and f"[0{SHARED_MARK} 3]" in out
    assert out.count("<tr>") == 3


def test_paged_view_byte_figures_side_by_side():
    md = pool_bytes_md(record())
    # padded 80 positions for 60 real: 25% waste; paged 4 blocks (64 slots) for 44 filled
    assert "| 3.69 MB | 25.0% |" in md and "| 2.95 MB | 31.2% |" in md
    assert "**16** prompt tokens mapped" in md and "**44** computed" in md
    assert "(**27%** of prefill skipped)" in md and "**2** preemptions" in md


def test_paged_view_empty_state():
    empty = record(requests=(), blocks_used=0, blocks_cached_idle=0, blocks_free=8,
                   blocks_shared=0, idle_blocks=(), prefix_hit_tokens=0, prefill_tokens=0)
    for out in (pool_grid_html(None), pool_grid_html(empty), block_tables_html(empty),
                pool_bytes_md(None)):
        assert EMPTY in out


def test_paged_view_server_parts_and_demo_text():
    from types import SimpleNamespace

    from visualizations.server_view import demo_md, server_pool_parts

    grid, tables, md = server_pool_parts(SimpleNamespace(pool=record()))
    assert "data-block='7'" in grid and "request 1" in tables and "25.0%" in md
    assert EMPTY in server_pool_parts(None)[0]
    req = SimpleNamespace(rid=3, state="running", prompt_tokens=30, generated_tokens=2,
                          text="Hi")
    out = demo_md(SimpleNamespace(note="One decode step.", seconds=0.25, requests=(req,)))
    assert "(250 ms, measured)" in out and "request 3 (running): 30 prompt tokens, 2" in out
