"""The live "Server" view, from the continuous batcher's `ServerStats`: the batch, where each
step's token budget and time go, and this server beside vLLM."""
from __future__ import annotations

import plotly.graph_objects as go

from .style import MEASURED, PALETTE, empty_figure, empty_state, styled

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
    return (f"**Server now:** {state}  \n"
            f"**{stats.active}** of {rows_limit} rows in the batch · **{stats.queued}** waiting"
            f"{why} · newest step **{stats.last_step_s * 1000:.0f} ms** · "
            f"**{stats.tokens_per_s:.1f} tokens/s** over the last {window_s:.0f} s "
            f"(measured) · KV cache of the batch **{stats.cache_bytes / 1e6:.1f} MB** · "
            f"caches kept by learners between steps **{stats.held_bytes / 1e6:.1f} MB** · "
            f"{stats.steps:,} forward passes, {stats.served:,} requests served since start"
            + (f"  \n{threads_md(stats.threads)}" if getattr(stats, "threads", ()) else ""))


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
    return (f"**CPU threads per pass: {chosen.threads}**, the count that timed fastest "
            f"({what} of {size}, newest: {timed}). The other counts are tried again now and "
            "then, as other programs come and go.")


def remote_stats_md(stats) -> str:
    """Which engine serves Try it's chats (LLM_LAB_SERVE_URL) and its own metrics."""
    def shown(value, fmt) -> str:
        return fmt.format(value) if value is not None else "not reported"

    if stats.error:
        return (f"**Try it is served by** {stats.url}: its metrics could not be read "
                f"({stats.error}). The server below serves this machine's lessons.")
    return (f"**Try it is served by {stats.engine}** at {stats.url}, not by this machine: "
            f"**{shown(stats.running, '{:.0f}')}** requests running · "
            f"**{shown(stats.waiting, '{:.0f}')}** waiting · KV cache "
            f"**{shown(stats.kv_cache_usage, '{:.0%}')}** in use (its own metrics). The "
            "server below serves this machine's lessons.")


def batch_history_figure(stats, caption: str = "") -> go.Figure:
    """Rows per forward pass over the last window (bars) and each pass's time (line)."""
    if stats is None or not stats.history:
        return empty_figure("No requests in the last minute: ask something in “Try it”, "
                            "then watch the batch here.")
    ago = [-h[0] for h in stats.history]
    fig = go.Figure([
        go.Bar(x=ago, y=[h[1] for h in stats.history], name="rows in the pass",
               marker_color=PALETTE["blue"]),
        go.Scatter(x=ago, y=[h[2] * 1000 for h in stats.history], yaxis="y2",
                   mode="lines+markers", name="pass time (ms, measured)",
                   line=dict(color=PALETTE["orange"], width=2))])
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
    """Shown while a request waits for a free row in the batch."""
    return ("*Joining the batch…*" if ahead <= 0 else
            f"*Waiting for a free row: {ahead} request(s) ahead of you.*")


def limit_note(finished: str | None, max_new: int) -> str:
    """A line when the answer stopped at the token limit (not at the end of its turn)."""
    return (f"⚠️ The answer stopped at your limit of **{max_new} new tokens**, not at its end: "
            "raise *Max new tokens* to read more." if finished == "max tokens" else "")


@empty_state(EMPTY_STEPS)
def budget_split_figure(steps, budget: int, caption: str = "") -> go.Figure:
    """Stacked decode and prefill-chunk tokens per step; the budget dashed (0: unchunked)."""
    x = [s.index for s in steps]
    fig = go.Figure([
        go.Bar(x=x, y=[s.decode_tokens for s in steps], name="decode tokens (running rows)",
               marker_color=PALETTE["blue"]),
        go.Bar(x=x, y=[s.prefill_tokens for s in steps],
               name="prefill-chunk tokens (newcomers' prompts)", marker_color=PALETTE["orange"])])
    if budget:
        fig.add_trace(go.Scatter(x=[x[0] - 0.5, x[-1] + 0.5], y=[budget, budget], mode="lines",
                                 name=f"token budget per step ({budget})",
                                 line=dict(color=PALETTE["grey"], dash="dash")))
    fig.update_layout(barmode="stack", bargap=0.1)
    note = (f"Each step's budget of {budget} tokens: running rows first, prompt chunks after."
            if budget else "Unchunked: a newcomer's whole prompt runs in one step.")
    return styled(fig, "Tokens in each server step", "server step", "tokens in the step", caption,
                  note=note)


@empty_state(EMPTY_STEPS)
def step_parts_figure(steps, caption: str = "") -> go.Figure:
    """Stacked bars per step of its measured parts, in ms."""
    fig = go.Figure([go.Bar(x=[s.index for s in steps], y=[getattr(s, field) * 1000 for s in steps],
                            name=f"{name} ({MEASURED})", marker_color=colour)
                     for field, name, colour in PARTS])
    fig.update_layout(barmode="stack", bargap=0.1)
    return styled(fig, "Where each step's time goes", "server step", "milliseconds", caption)


def peer_comparison_md(c) -> str:
    """The class served by both engines, labelled with its machine and date."""
    if c is None:
        return NONE_YET
    rows = [("this app", c.app), (f"vLLM {c.vllm_version}", c.vllm)]
    table = "\n".join(f"| {name} | **{s.tokens_per_s:.1f}** | {s.p95_latency_s:.1f} s | "
                      f"{s.p95_ttft_s:.1f} s |" for name, s in rows)
    where = (f"Measured on this machine ({c.machine}) at {c.when} by `{c.source}`."
             if c.here else
             f"Recorded on a {c.machine} at {c.when} by `{c.source}`, not measured by this "
             "installation: `make bench-serving` here measures this machine's figures.")
    return (f"{c.clients} students press Generate at once, {c.new_tokens} new tokens each, "
            "greedy, streaming; the same prompts and client code, sent to this app's page and "
            "to vLLM's OpenAI server on the same machine, one after the other. p95: what the "
            "slowest 5% of the students waited.\n\n"
            "| | tokens/s | p95 answer | p95 first token |\n"
            "|---|---|---|---|\n" + table + "\n\n"
            f"This app served **{c.app.tokens_per_s / c.vllm.tokens_per_s:.2f}×** vLLM's tokens "
            f"per second; its slowest 5% waited **{c.app.p95_latency_s / c.vllm.p95_latency_s:.2f}"
            f"×** as long for their whole answer. One run each, with vLLM's CPU backend, on the "
            f"{c.machine}: a comparison on that CPU, not of the engines at their best. On a GPU "
            "vLLM runs its own kernels (attention read through the block table, CUDA graphs), "
            f"and both figures and their ratio change. *{where}*")
