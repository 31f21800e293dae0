"""Long contexts, drawn: prefill time per prompt token with its a + b·L + c·L² fit, one decode
step against the cache length beside the bandwidth floor, and attention's peak memory."""
from __future__ import annotations

import plotly.graph_objects as go

from .style import MEASURED, PALETTE, THEORETICAL, empty_state, styled

PREFILL_BUTTON = "Measure prefill lengths"  # the panel's buttons, named in the empty states
DECODE_BUTTON = "Measure decode lengths"
MEMORY_BUTTON = "Measure attention memory"
BATCH_COLOURS = {1: PALETTE["blue"], 8: PALETTE["vermillion"]}


@empty_state(f"Press “{PREFILL_BUTTON}”: one prefill at each prompt length, up to the model's "
             "context window.")
def prefill_lengths_figure(points, curve=None, shares=(), caption: str = "") -> go.Figure:
    """ms per prompt token at each length (measured), the fit ÷ L, and it without L²."""
    xs = [p.tokens for p in points]
    share_of = {s.tokens: s.quadratic_share for s in shares}
    fig = go.Figure(go.Scatter(
        x=xs, y=[p.seconds_per_token * 1000 for p in points], mode="markers+text",
        name=f"one prefill ÷ its tokens ({MEASURED})", marker=dict(color=PALETTE["blue"], size=11),
        text=[f"L²: {share_of[x]:.0%}" if x in share_of else "" for x in xs],
        textposition="top center", customdata=[p.seconds for p in points],
        hovertemplate="L = %{x:,}: %{y:.2f} ms per token, %{customdata:.1f} s in all"
                      "<extra></extra>"))
    if curve is not None:  # evenly spread on the log axis, shortest to longest length
        lo, hi = min(xs), max(xs)
        line = [lo * (hi / lo) ** (i / 40) for i in range(41)] if hi > lo else [float(lo)]
        fig.add_trace(go.Scatter(
            x=line, y=[curve.at(x) / x * 1000 for x in line], mode="lines",
            name=f"fit a + b·L + c·L², per token ({THEORETICAL}, least squares)",
            line=dict(color=PALETTE["orange"], width=3)))
        fig.add_trace(go.Scatter(
            x=line, y=[(curve.a + curve.b * x) / x * 1000 for x in line], mode="lines",
            name="the same fit without its L² term (attention's scores)",
            line=dict(color=PALETTE["grey"], dash="dash", width=2)))
    fig.update_xaxes(type="log")
    return styled(fig, "Prefill time per prompt token", "prompt length L (tokens, log)",
                  "ms per prompt token", caption, height=420,
                  note="Time per prompt token at each prompt length.")


@empty_state(f"Press “{DECODE_BUTTON}”: one decode step at each cache length, batch 1 and batch 8.")
def decode_lengths_figure(points, theory=None, window: int = 0, caption: str = "") -> go.Figure:
    """One decode step against its cache length per batch, the floor per batch, and L*."""
    batches = sorted({p.batch for p in points})
    right = max([window] + [p.cache_tokens for p in points])
    if theory is not None:
        stars = [theory.crossover_tokens(b) for b in batches]
        right = max([right] + [s for s in stars if s <= 2 * max(window, 1)])
    fig = go.Figure()
    for b in batches:
        colour = BATCH_COLOURS.get(b, PALETTE["green"])
        mine = sorted((p for p in points if p.batch == b), key=lambda p: p.cache_tokens)
        fig.add_trace(go.Scatter(
            x=[p.cache_tokens for p in mine], y=[p.seconds * 1000 for p in mine],
            mode="lines+markers", name=f"batch {b}: one step ({MEASURED}, median)",
            line=dict(color=colour, width=3), marker=dict(size=9),
            error_y=dict(type="data", symmetric=False,
                         array=[(p.seconds_max - p.seconds) * 1000 for p in mine],
                         arrayminus=[(p.seconds - p.seconds_min) * 1000 for p in mine])))
        if theory is None:
            continue
        line = [round(right * i / 32) for i in range(33)]
        fig.add_trace(go.Scatter(
            x=line, y=[theory.seconds(x, b) * 1000 for x in line], mode="lines",
            name=f"batch {b}: floor ({THEORETICAL}: (weights + {b}·L·kv) ÷ "
                 f"{theory.bandwidth_gbs:.1f} GB/s)",
            line=dict(color=colour, dash="dash", width=2)))
        star = theory.crossover_tokens(b)
        if star <= right:
            fig.add_vline(x=star, line=dict(color=colour, dash="dot", width=2),
                          annotation_text=f"L* = {star:,} (batch {b})",
                          annotation_position="top left" if b > 1 else "top right")
    if window:
        fig.add_vline(x=window, line=dict(color=PALETTE["grey"], width=2),
                      annotation_text=f"context window {window:,}",
                      annotation_position="bottom left")
    return styled(fig, "Decode step vs cache length", "cache length L (tokens)",
                  "milliseconds per step", caption, height=440,
                  note="One step against the length of the cache it reads.")


@empty_state(f"Press “{MEMORY_BUTTON}”: the same long prefill with eager and "
             "with tiled (sdpa) attention.")
def attention_memory_figure(peaks, caption: str = "") -> go.Figure:
    """Peak memory of one prefill per attention implementation, beside one layer's scores."""
    labels = [f"{p.implementation} ({p.tokens:,} tokens)" for p in peaks]
    fig = go.Figure([
        go.Bar(x=labels, y=[p.peak_bytes / 1e6 for p in peaks],
               name=f"peak memory above the start ({MEASURED})",
               marker_color=[PALETTE["vermillion"] if p.implementation == "eager"
                             else PALETTE["green"] for p in peaks],
               text=[f"{p.peak_bytes / 1e6:,.0f} MB" for p in peaks], textposition="outside"),
        go.Scatter(x=labels, y=[p.scores_bytes / 1e6 for p in peaks], mode="markers",
                   name=f"one layer's L × L scores, heads × L² values ({THEORETICAL})",
                   marker=dict(symbol="line-ew-open", size=40, color=PALETTE["grey"],
                               line=dict(width=3)))])
    top = max(max(p.peak_bytes, p.scores_bytes) for p in peaks) / 1e6
    fig.update_yaxes(range=[0, top * 1.25])
    return styled(fig, "Attention's peak memory", "attention implementation", "MB", caption,
                  height=420, note="The score table written out, or computed in tiles.")
