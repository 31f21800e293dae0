"""The live "Server" view, from the continuous batcher's `ServerStats`: the batch, where each
step's budget and time go, this server beside vLLM, and its KV cache in pages (`PoolStats`)."""
from __future__ import annotations

import html

import plotly.graph_objects as go

from .cards import md_table
from .style import MEASURED, PALETTE, empty_figure, empty_state, line_trace, styled
from .token_view import TINTS

EMPTY_STEPS = ("No server steps yet: ask something in “Try it”, then each step's split between "
               "decode tokens and prompt chunks appears here.")
PARTS = (("forward_s", "forward pass", PALETTE["blue"]),
         ("cache_s", "cache work (blocks, tables)", PALETTE["orange"]),
         ("sample_s", "sampling + detokenizing", PALETTE["green"]),
         ("handoff_s", "handing events to handlers", PALETTE["vermillion"]),
         ("other_s", "the loop's own Python", PALETTE["grey"]))
NONE_YET = ("*No comparison with vLLM measured yet: `make bench-serving` measures one on this "
            "machine (vLLM in a venv of its own, the same class sent to both).*")


def server_stats_md(stats, rows_limit: int, window_s: float) -> str:
    """One block of headline numbers, every one read from the running server."""
    if stats is None:
        return "*The server view fills in once the app has served a request.*"
    state = "⏸ paused: held between steps (a test or benchmark)" if stats.paused else (
        "▶ serving" if stats.active else "idle: waiting for requests")
    plan = getattr(stats, "plan", None)  # the newest step's plan says why a newcomer waits
    why = f" (the oldest: {plan.waiting})" if stats.queued and plan and plan.waiting else ""
    now = (f"**{stats.active}** of {rows_limit} rows in the batch · **{stats.queued}** "
           f"waiting{why} · newest step **{stats.last_step_s * 1000:.0f} ms** · "
           f"**{stats.tokens_per_s:.1f} tokens/s** over the last {window_s:.0f} s (measured) · KV "
           f"cache of the batch **{stats.cache_bytes / 1e6:.1f} MB** · caches kept by learners "
           f"between steps **{stats.held_bytes / 1e6:.1f} MB** · {stats.steps:,} forward passes, "
           f"{stats.served:,} requests served since start")
    threads = f"  \n{threads_md(stats.threads)}" if getattr(stats, "threads", ()) else ""
    return f"**Server now:** {state}  \n{now}{threads}"


def threads_md(figures) -> str:
    """The CPU threads per pass now, and each count's newest ms per token that chose them."""
    if not figures:
        return ""
    kinds = [f for f in figures if f.kind == "decode"] or list(figures)
    top = max(f.tokens for f in kinds)
    shape = [f for f in kinds if f.tokens == top]
    chosen = next(f for f in shape if f.chosen)
    timed = "; ".join(f"{f.seconds_per_token * 1000:.2f} ms per token with {f.threads} "
                      f"thread{'s' if f.threads > 1 else ''}" for f in shape)
    what = "decode passes" if chosen.kind == "decode" else "prompt passes"
    size = "1 token" if top == 1 else f"{top}-{2 * top - 1} tokens"
    return (f"**CPU threads per pass: {chosen.threads}**, the count that timed fastest ({what} of "
            f"{size}, newest: {timed}). The other counts are tried again now and then, as other "
            "programs come and go.")


def remote_stats_md(stats) -> str:
    """Which engine serves Try it's chats (LLM_LAB_SERVE_URL) and its own metrics."""
    def shown(value, fmt) -> str:
        return fmt.format(value) if value is not None else "not reported"

    if stats.error:
        return (f"**Try it is served by** {stats.url}: its metrics could not be read "
                f"({stats.error}). The server below serves this machine's lessons.")
    return (f'**Try it is served by {stats.engine}** at {stats.url}, not by this machine: '
            f'**{shown(stats.running, "{:.0f}")}** requests running · '
            f'**{shown(stats.waiting, "{:.0f}")}** waiting · KV cache '
            f'**{shown(stats.kv_cache_usage, "{:.0%}")}** in use (its own metrics). The server '
            'below serves this machine\'s lessons.')


def batch_history_figure(stats, caption: str = "") -> go.Figure:
    if stats is None or not stats.history:
        return empty_figure("No requests in the last minute: ask something in “Try it”, "
                            "then watch the batch here.")
    ago = [-h[0] for h in stats.history]
    fig = go.Figure([
        go.Bar(x=ago, y=[h[1] for h in stats.history], name="rows in the pass",
               marker_color=PALETTE["blue"]),
        line_trace(ago, [h[2] * 1000 for h in stats.history], "pass time (ms, measured)",
                   PALETTE["orange"], width=2, yaxis="y2")])
    fig.update_layout(yaxis2=dict(title="pass time (ms)", overlaying="y", side="right",
                                  rangemode="tozero"), bargap=0.1)
    return styled(fig, "Rows per forward pass", "seconds ago", "requests in the pass", caption,
                  note="Continuous batching, serving this room.")


def shared_steps_note(mean_rows: float, queued_s: float) -> str:
    """The line under a chat answer: how many requests shared its forward passes."""
    if mean_rows <= 0:
        return ""
    others = max(mean_rows - 1, 0)
    shared = (f"shared each forward pass with **{others:.1f}** other request(s) on average"
              if others >= 0.05 else "ran alone in its forward passes")
    wait = f" · waited {queued_s:.1f} s for a free row" if queued_s >= 0.05 else ""
    return f"Served by the continuous batcher: {shared}{wait}."


def waiting_md(ahead: int) -> str:
    return ("*Joining the batch…*" if ahead <= 0 else
            f"*Waiting for a free row: {ahead} request(s) ahead of you.*")


def limit_note(finished: str | None, max_new: int) -> str:
    """A line when the answer stopped at the token limit (not at the end of its turn)."""
    return (f"⚠️ The answer stopped at your limit of **{max_new} new tokens**, not at its end: "
            "raise *Max new tokens* to read more." if finished == "max tokens" else "")


@empty_state(EMPTY_STEPS)
def budget_split_figure(steps, budget: int, caption: str = "") -> go.Figure:
    """Stacked decode and prefill-chunk tokens per step; the budget dashed (0: unchunked)."""
    x = [s.plan.index for s in steps]
    fig = go.Figure([
        go.Bar(x=x, y=[len(s.plan.decode) for s in steps], name="decode tokens (running rows)",
               marker_color=PALETTE["blue"]),
        go.Bar(x=x, y=[s.plan.prefill_tokens for s in steps],
               name="prefill-chunk tokens (newcomers' prompts)", marker_color=PALETTE["orange"])])
    if budget:
        fig.add_trace(line_trace([x[0] - 0.5, x[-1] + 0.5], [budget, budget],
                                 f"token budget per step ({budget})", PALETTE["grey"], width=2,
                                 dash="dash", mode="lines"))
    fig.update_layout(barmode="stack", bargap=0.1)
    note = (f"Each step's budget of {budget} tokens: running rows first, prompt chunks after."
            if budget else "Unchunked: a newcomer's whole prompt runs in one step.")
    return styled(fig, "Tokens in each server step", "server step", "tokens in the step", caption,
                  note=note)


@empty_state(EMPTY_STEPS)
def step_parts_figure(steps, caption: str = "") -> go.Figure:
    x = [s.plan.index for s in steps]
    fig = go.Figure([go.Bar(x=x, y=[getattr(s, field) * 1000 for s in steps],
                            name=f"{name} ({MEASURED})", marker_color=colour)
                     for field, name, colour in PARTS])
    fig.update_layout(barmode="stack", bargap=0.1)
    return styled(fig, "Where each step's time goes", "server step", "milliseconds", caption)


def peer_comparison_md(c) -> str:
    """The class served by both engines, labelled with its machine and date."""
    if c is None:
        return NONE_YET
    table = md_table(" | tokens/s | p95 answer | p95 first token", [
        [name, f"**{s.tokens_per_s:.1f}**", f"{s.p95_latency_s:.1f} s", f"{s.p95_ttft_s:.1f} s"]
        for name, s in (("this app", c.app), (f"vLLM {c.vllm_version}", c.vllm))])
    where = (f"Measured on this machine ({c.machine}) at {c.when} by `{c.source}`."
             if c.here else
             f"Recorded on a {c.machine} at {c.when} by `{c.source}`, not measured by this "
             "installation: `make bench-serving` here measures this machine's figures.")
    return (f"{c.clients} students press Generate at once, {c.new_tokens} new tokens each, "
            "greedy, streaming; the same prompts and client code, sent to this app's page and "
            "to vLLM's OpenAI server on the same machine, one after the other. p95: what the "
            "slowest 5% of the students waited.\n\n" + table + "\n\n"
            f"This app served **{c.app.tokens_per_s / c.vllm.tokens_per_s:.2f}×** vLLM's tokens "
            f"per second; its slowest 5% waited **{c.app.p95_latency_s / c.vllm.p95_latency_s:.2f}"
            f"×** as long for their whole answer. One run each, with vLLM's CPU backend, on the "
            f"{c.machine}: a comparison on that CPU, not of the engines at their best. On a GPU "
            "vLLM runs its own kernels (attention read through the block table, CUDA graphs), "
            f"and both figures and their ratio change. *{where}*")


EMPTY = "No requests yet: send a chat in “Try it”, then watch its blocks fill here."
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
            style = "background:repeating-linear-gradient(135deg,#e4e4e4 0 3px,#fff 3px 6px)"
            kind, label = "cached, idle (kept for its prefix)", ""
        else:
            style, kind, label = "background:#ffffff", "free", ""
        cells.append(
            f"<span class='lab-block' data-block='{b}' data-kind='{html.escape(kind)}' "
            f"title='block {b}: {html.escape(kind)}' style='display:inline-block;width:{size}px;"
            f"height:{size}px;margin:1px;border:1px solid #999;font-size:{size - 8}px;"
            f"line-height:{size}px;text-align:center;color:#111;{style}'>{label}</span>")
    legend = (f"<b>{pool.blocks_total:,}</b> blocks of {pool.block_tokens} tokens · "
              f"<b>{pool.blocks_used:,}</b> held by requests (<b>{pool.blocks_shared:,}</b> shared "
              f"{SHARED_MARK}) · <b>{pool.blocks_cached_idle:,}</b> cached, idle (hatched) · "
              f"<b>{pool.blocks_free:,}</b> free (blank)")
    cap = f"<div class='lab-caption'>{html.escape(caption)}</div>" if caption else ""
    return (f"<div class='lab-pool'><div style='line-height:0'>{''.join(cells)}</div>"
            f"<div class='lab-pool-legend'>{legend}</div>{cap}</div>")


def block_tables_html(pool) -> str:
    if pool is None or not pool.requests:
        return f"<div class='lab-empty'>{html.escape(EMPTY)}</div>"
    owners = _owners(pool)
    rows = []
    for r in pool.requests:
        ids = " ".join(f"{b}{SHARED_MARK}" if len(owners[b]) > 1 else str(b) for b in r.block_table)
        rows.append(f"<tr><td><span style='background:{request_tint(r.rid)};padding:0 6px'>"
                    f"request {r.rid}</span></td><td>{r.tokens:,}</td>"
                    f"<td>{len(r.block_table)}</td><td>{r.shared_blocks}</td>"
                    f"<td>{r.prefix_hit_tokens:,}</td><td><code>[{ids}]</code></td></tr>")
    head = ("<tr><th>request</th><th>tokens cached</th><th>blocks</th><th>shared</th>"
            "<th>prefix-hit tokens</th><th>block table</th></tr>")
    return f"<table class='lab-block-tables'>{head}{''.join(rows)}</table>"


def pool_bytes_md(pool) -> str:
    if is_empty(pool):
        return f"*{EMPTY}*"
    lines = [md_table("the batch now | bytes | waste", [
        [f"padded: {len(pool.requests)} rows × the longest row, one tensor",
         f"{pool.padded_bytes / 1e6:.2f} MB", f"{pool.waste_padded_pct:.1f}%"],
        [f"paged: the blocks these rows hold ({pool.block_tokens} tokens each)",
         f"{pool.paged_bytes / 1e6:.2f} MB", f"{pool.waste_paged_pct:.1f}%"],
        ["the tokens themselves, each row its own", f"{pool.real_bytes / 1e6:.2f} MB", ""]]), "",
        f"Prefix cache: **{pool.prefix_hit_tokens:,}** prompt tokens mapped from cached blocks, "
        f"**{pool.prefill_tokens:,}** computed by prefill (**{pool.prefill_skipped_pct:.0f}%** of "
        f"prefill skipped) · **{pool.preemptions:,}** preemptions · **{pool.evictions:,}** idle "
        f"blocks evicted (since start; bytes read from the pool's books: blocks × "
        f"{pool.block_bytes:,} bytes each)."]
    return "\n".join(lines)


def server_pool_parts(stats, caption: str = "") -> tuple[str, str, str]:
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
