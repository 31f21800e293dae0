"""The server's KV cache in pages, from a `PoolStats` record: one cell per block (coloured by
its request; shared prefix blocks striped "⧉"; cached-idle blocks hatched; free blocks blank),
each request's block table, and a left-padded tensor's bytes against the pages' bytes."""
from __future__ import annotations

import html

from .token_view import TINTS

EMPTY = "No requests yet: send a chat in “Try it”, then watch its blocks fill here."
IDLE = "#e4e4e4"
SHARED_MARK = "⧉"


def _owners(pool) -> dict[int, list[int]]:
    """block id -> request ids holding it (admission order)."""
    owners: dict[int, list[int]] = {}
    for r in pool.requests:
        for b in r.block_table:
            owners.setdefault(b, []).append(r.rid)
    return owners


def request_tint(rid: int) -> str:
    return TINTS[rid % len(TINTS)]


def is_empty(pool) -> bool:
    return pool is None or not (pool.requests or pool.blocks_cached_idle
                                or pool.prefix_hit_tokens or pool.prefill_tokens)


def pool_grid_html(pool, caption: str = "") -> str:
    """One cell per block of the pool; a legend with the four counts under it."""
    if is_empty(pool):
        return f"<div class='lab-pool lab-empty'>{html.escape(EMPTY)}</div>"
    owners, idle = _owners(pool), set(pool.idle_blocks)
    size = 22 if pool.blocks_total <= 128 else 12
    cells = []
    for b in range(pool.blocks_total):
        held = owners.get(b, [])
        if len(held) > 1:
            a, c = request_tint(held[0]), request_tint(held[1])
            style = f"background:repeating-linear-gradient(45deg,{a} 0 4px,{c} 4px 8px)"
            kind, label = f"shared by requests {', '.join(map(str, held))}", SHARED_MARK
        elif held:
            style, kind, label = f"background:{request_tint(held[0])}", f"request {held[0]}", ""
        elif b in idle:
            style = f"background:repeating-linear-gradient(135deg,{IDLE} 0 3px,#fff 3px 6px)"
            kind, label = "cached, idle (kept for its prefix)", ""
        else:
            style, kind, label = "background:#ffffff", "free", ""
        cells.append(
            f"<span class='lab-block' data-block='{b}' data-kind='{html.escape(kind)}' "
            f"title='block {b}: {html.escape(kind)}' style='display:inline-block;width:{size}px;"
            f"height:{size}px;margin:1px;border:1px solid #999;font-size:{size - 8}px;"
            f"line-height:{size}px;text-align:center;color:#111;{style}'>{label}</span>")
    legend = (f"<b>{pool.blocks_total:,}</b> blocks of {pool.block_tokens} tokens · "
              f"<b>{pool.blocks_used:,}</b> held by requests "
              f"(<b>{pool.blocks_shared:,}</b> shared {SHARED_MARK}) · "
              f"<b>{pool.blocks_cached_idle:,}</b> cached, idle (hatched) · "
              f"<b>{pool.blocks_free:,}</b> free (blank)")
    cap = f"<div class='lab-caption'>{html.escape(caption)}</div>" if caption else ""
    return (f"<div class='lab-pool'><div style='line-height:0'>{''.join(cells)}</div>"
            f"<div class='lab-pool-legend'>{legend}</div>{cap}</div>")


def block_tables_html(pool) -> str:
    """A table: each request, its tokens, and its block table (shared blocks marked)."""
    if pool is None or not pool.requests:
        return f"<div class='lab-empty'>{html.escape(EMPTY)}</div>"
    owners = _owners(pool)
    rows = []
    for r in pool.requests:
        ids = " ".join(f"{b}{SHARED_MARK}" if len(owners[b]) > 1 else str(b)
                       for b in r.block_table)
        rows.append(f"<tr><td><span style='background:{request_tint(r.rid)};padding:0 6px'>"
                    f"request {r.rid}</span></td><td>{r.tokens:,}</td>"
                    f"<td>{len(r.block_table)}</td><td>{r.shared_blocks}</td>"
                    f"<td>{r.prefix_hit_tokens:,}</td><td><code>[{ids}]</code></td></tr>")
    head = ("<tr><th>request</th><th>tokens cached</th><th>blocks</th><th>shared</th>"
            "<th>prefix-hit tokens</th><th>block table</th></tr>")
    return f"<table class='lab-block-tables'>{head}{''.join(rows)}</table>"


def pool_bytes_md(pool) -> str:
    """The two byte figures side by side for the batch now, then the prefix-cache counts."""
    if is_empty(pool):
        return f"*{EMPTY}*"
    lines = [
        "| the batch now | bytes | waste |", "|---|---|---|",
        f"| padded: {len(pool.requests)} rows × the longest row, one tensor | "
        f"{pool.padded_bytes / 1e6:.2f} MB | {pool.waste_padded_pct:.1f}% |",
        f"| paged: the blocks these rows hold ({pool.block_tokens} tokens each) | "
        f"{pool.paged_bytes / 1e6:.2f} MB | {pool.waste_paged_pct:.1f}% |",
        f"| the tokens themselves, each row its own | {pool.real_bytes / 1e6:.2f} MB | |", "",
        f"Prefix cache: **{pool.prefix_hit_tokens:,}** prompt tokens mapped from cached "
        f"blocks, **{pool.prefill_tokens:,}** computed by prefill "
        f"(**{pool.prefill_skipped_pct:.0f}%** of prefill skipped) · "
        f"**{pool.preemptions:,}** preemptions · **{pool.evictions:,}** idle blocks evicted "
        f"(since start; bytes read from the pool's books: blocks × "
        f"{pool.block_bytes:,} bytes each)."]
    return "\n".join(lines)


def server_pool_parts(stats, caption: str = "") -> tuple[str, str, str]:
    """(pool grid HTML, block tables HTML, bytes markdown) for the live server view."""
    pool = None if stats is None else stats.pool
    return pool_grid_html(pool, caption), block_tables_html(pool), pool_bytes_md(pool)


def demo_md(view) -> str:
    """Lesson 4's pages demo: what the last action did, then each request and its answer."""
    if view is None:
        return "*Start a pool, then add a request.*"
    lines = [f"**{view.note}**" + (f" ({view.seconds * 1000:,.0f} ms, measured)"
                                    if view.seconds else "")]
    for r in view.requests:
        lines.append(f"- request {r.rid} ({r.state}): {r.prompt_tokens} prompt tokens, "
                     f"{r.generated_tokens} generated: {r.text!r}")
    return "\n".join(lines)
