"""Lesson 4 charts (the cache drawn from its tensors, the race, projections, prefix reuse) and
4c's long contexts: prefill's a + b·L + c·L² fit, decode against the floor, attention's memory."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import style
from .cards import human_bytes
from .style import MEASURED, PALETTE, SEQUENCE, THEORETICAL, empty_state, integer_ticks, styled


def cache_grid_figure(snap, prompt_tokens: int, caption: str = "") -> go.Figure:
    """The real cache: one row per layer, one column per cached token, colour = key length."""
    if snap is None or not snap.tokens:
        return style.empty_figure("Press “Generate and watch the cache”: the real cache "
                                  "tensors appear here, one column per token.")
    fig = go.Figure(go.Heatmap(
        z=[list(row) for row in snap.key_norms], x=list(range(snap.tokens)),
        y=list(range(snap.layers)), colorscale="Viridis", colorbar=dict(title="|key|"),
        hovertemplate="layer %{y} · position %{x}<br>key length %{z:.2f}<extra></extra>"))
    if 0 < prompt_tokens < snap.tokens:
        fig.add_vline(x=prompt_tokens - 0.5, line=dict(color=PALETTE["vermillion"], width=3),
                      annotation_text="prompt | generated", annotation_position="top left")
    b, h, s, d = snap.shapes[0]
    integer_ticks(fig, snap.tokens)
    note = (f"{snap.layers} layers × keys and values [{b}, {h}, {s}, {d}] = "
            f"{human_bytes(snap.tensor_bytes)}; colour: each key's length (values held, not "
            "drawn).")
    return styled(fig, "The real KV cache", "position (one column per token)", "layer",
                  caption, height=360, note=note)


@empty_state("Press “Generate and watch the cache”: its bytes appear here, token by token, "
             "beside the formula.")
def cache_bytes_figure(history: list[tuple[int, int, int]], caption: str = "") -> go.Figure:
    """history: (tokens, bytes the tensors hold, bytes the formula predicts) after each step."""
    tokens = [h[0] for h in history]
    fig = go.Figure([
        style.line_trace(tokens, [h[2] for h in history], f"formula ({THEORETICAL})",
                         PALETTE["orange"], mode="lines"),
        go.Scatter(x=tokens, y=[h[1] for h in history], mode="markers",
                   name=f"real tensors ({MEASURED})", marker=dict(color=PALETTE["blue"], size=8)),
    ])
    integer_ticks(fig, max(tokens) + 1)
    return styled(fig, "Cache bytes, token by token", "tokens in the cache", "bytes", caption,
                  note="The cache grows by the same bytes with every token.")


@empty_state("Press Race: each step's time, with and without the cache, appears here.")
def race_figure(steps, caption: str = "") -> go.Figure:
    """Per-step latency of both lanes (left axis) and tokens each forward pass processed (right)."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    lanes = (("cached", PALETTE["blue"], "with KV cache"),
             ("recompute", PALETTE["vermillion"], "no cache: recompute everything"))
    for lane, colour, label in lanes:
        mine = [s for s in steps if s.lane == lane]
        fig.add_trace(style.line_trace(
            [s.index for s in mine], [s.seconds * 1000 for s in mine],
            f"{label}: ms per step ({MEASURED})", colour,
            customdata=[s.forward_tokens for s in mine],
            hovertemplate="token %{x}: %{y:.0f} ms, %{customdata} tokens through the model"
                          "<extra></extra>"), secondary_y=False)
        fig.add_trace(style.line_trace(
            [s.index for s in mine], [s.forward_tokens for s in mine],
            f"{label}: tokens per forward pass", colour, width=1.5, dash="dot", mode="lines",
            hoverinfo="skip"), secondary_y=True)
    styled(fig, "Cache on vs off", "output token (0 = first, after prefill)",
           "milliseconds per step", caption, height=420, note="Time for each new token.")
    integer_ticks(fig, max(s.index for s in steps) + 1)
    fig.update_yaxes(title_text="tokens per pass (dotted)", secondary_y=True, showgrid=False)
    return fig


THEORY_UP_TO = 4096  # tokens: where the theoretical lines of the length race stop


@empty_state("Press “Race at several lengths”: one step at each length, both ways.")
def race_lengths_figure(points, curve=None, caption: str = "") -> go.Figure:
    """One step's time at each context length, both lanes, then the theory to THEORY_UP_TO."""
    xs = [p.tokens for p in points]
    fig = go.Figure([
        style.line_trace(xs, [p.cached_seconds * 1000 for p in points],
                         f"with KV cache: one step ({MEASURED})", PALETTE["blue"],
                         marker=dict(size=10)),
        style.line_trace(xs, [p.recompute_seconds * 1000 for p in points],
                         f"no cache: all L + 1 tokens again ({MEASURED})", PALETTE["vermillion"],
                         marker=dict(size=10))])
    if curve is not None and len(points) > 1:
        last = max(points, key=lambda p: p.tokens)
        far = [last.tokens * 2**i for i in range(20) if last.tokens * 2**i <= THEORY_UP_TO]
        if far[-1] < THEORY_UP_TO:
            far.append(THEORY_UP_TO)
        fig.add_trace(style.line_trace(
            far, [last.cached_theory_seconds(x) * 1000 for x in far],
            f"with cache, beyond ({THEORETICAL}: (weights + L × KV bytes) ÷ the bandwidth its "
            f"{last.tokens:,}-token step reached)", PALETTE["blue"], width=2, dash="dash",
            mode="lines",
            customdata=[f"{last.bytes_read(x) / 1e6:,.0f} MB read" for x in far],
            hovertemplate="L = %{x:,}: %{y:.0f} ms, %{customdata}<extra></extra>"))
        fig.add_trace(style.line_trace(
            far, [curve.at(x) * 1000 for x in far],
            f"no cache, beyond ({THEORETICAL}: a + b·L + c·L² through the points)",
            PALETTE["vermillion"], width=2, dash="dash", mode="lines"))
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log")
    return styled(fig, "One step at length L", "context length L (tokens, log)",
                  "milliseconds per step (log)", caption, height=420,
                  note="With and without the cache.")


def projection_figure(proj, caption: str = "", highlight: str | None = None) -> go.Figure:
    """Cache bytes per model against context length or batch size (log-log), weights dashed;
    each cache line solid within the model's context window, dotted beyond it."""
    fig, xs = go.Figure(), proj.xs
    for i, ((name, ys), (_, weights)) in enumerate(zip(proj.series, proj.weights)):
        colour = SEQUENCE[i % len(SEQUENCE)]
        width = 5 if name == highlight else 2.5
        inside = proj.within[i] if proj.within else (True,) * len(xs)
        shown = [k for k, ok in enumerate(inside) if ok]
        past = [k for k, ok in enumerate(inside) if not ok]
        if shown:
            fig.add_trace(style.line_trace(
                [xs[k] for k in shown], [ys[k] for k in shown], f"{name} KV cache", colour, width,
                hovertemplate="%{x:,}: %{y:.3s}B<extra>" + name + "</extra>"))
        if past:
            joined = ([shown[-1]] if shown and shown[-1] < past[0] else []) + past
            fig.add_trace(style.line_trace(
                [xs[k] for k in joined], [ys[k] for k in joined],
                f"{name}: beyond its context window "
                f"({proj.windows[i] if proj.windows else 'unknown'})", colour,
                width=max(width - 1, 1.5), dash="dot", marker=dict(symbol="circle-open"),
                hovertemplate=("%{x:,}: %{y:.3s}B, beyond the model's context window<extra>"
                               + name + "</extra>")))
        fig.add_trace(style.line_trace(
            [xs[0], xs[-1]], [weights, weights], f"{name} weights", colour, width=1.5, dash="dash",
            mode="lines", hovertemplate=f"{name} weights: {human_bytes(weights)}<extra></extra>"))
    styled(fig, f"KV cache vs {proj.x_name.split(' (')[0]}", proj.x_name, "memory (log scale)",
           caption, height=480,
           note=f"{THEORETICAL.capitalize()}: {proj.bytes_per_value} bytes per value, "
                f"{proj.fixed}.")
    values = [v for _, vs in proj.series for v in vs] + [w for _, w in proj.weights]
    ticks = [10 ** e for e in range(len(str(min(values))) - 1, len(str(max(values))) + 1)]
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log", tickvals=ticks, ticktext=[human_bytes(t) for t in ticks])
    return fig  # the legend stays below the plot (styled): a side legend squeezed phones


def gqa_figure(rows: list[tuple[str, int]], caption: str = "") -> go.Figure:
    """Cache bytes per token: (label, bytes) pairs, e.g. this model with GQA vs as if MHA."""
    fig = go.Figure(go.Bar(x=[r[0] for r in rows], y=[r[1] for r in rows],
                           marker_color=SEQUENCE[:len(rows)],
                           text=[human_bytes(r[1]) for r in rows], textposition="outside"))
    fig.update_yaxes(range=[0, max((r[1] for r in rows), default=1) * 1.2])
    return styled(fig, "Cache bytes per token", "attention layout", "bytes per token", caption,
                  note=f"Grouped-query vs multi-head attention ({THEORETICAL}).")


@empty_state("Press “Run both ways”: each question's time to first token, with and without "
             "the stored prefix, appears here.")
def prefix_figure(runs, caption: str = "") -> go.Figure:
    labels = [r.question if len(r.question) <= 28 else r.question[:27] + "…" for r in runs]
    fig = go.Figure([
        go.Bar(x=labels, y=[r.ttft_full * 1000 for r in runs], name=f"full prefill ({MEASURED})",
               marker_color=PALETTE["vermillion"], textposition="outside",
               text=[f"{r.prompt_tokens} tokens" for r in runs]),
        go.Bar(x=labels, y=[r.ttft_reuse * 1000 for r in runs], name=f"prefix reused ({MEASURED})",
               marker_color=PALETTE["green"], textposition="outside",
               text=[f"{r.prompt_tokens - r.reused_tokens} tokens" for r in runs])])
    fig.update_layout(barmode="group")
    fig.update_yaxes(range=[0, max(max(r.ttft_full, r.ttft_reuse) for r in runs) * 1000 * 1.2])
    return styled(fig, "Time to first token", "question", "time to first token (ms)", caption,
                  note="With and without the shared prefix cache.")


def attention_figure(view, layer: int, head: int, caption: str = "") -> go.Figure:
    """The newest token's attention weights over every cached position, for one layer and head."""
    weights = view.weights[layer][head]
    labels = [f"{i}: {p!r}"[:24] for i, p in enumerate(view.pieces)]
    fig = go.Figure(go.Bar(x=list(range(len(weights))), y=list(weights), customdata=labels,
                           marker_color=PALETTE["blue"],
                           hovertemplate="%{customdata}<br>weight %{y:.3f}<extra></extra>"))
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(weights))),
                     ticktext=[p.replace("\n", "⏎")[:10] for p in view.pieces], tickangle=-60)
    return styled(fig, "What the newest token reads", "cached position (token)",
                  "attention weight (sums to 1)", caption, height=480,
                  note=f"Newest token {view.pieces[-1]!r} reads the cache: layer {layer}, query "
                       f"head {head} (KV head {view.kv_head_of(head)}).")


PREFILL_BUTTON = "Measure prefill lengths"  # the panel's buttons, named in the empty states
DECODE_BUTTON = "Measure decode lengths"
MEMORY_BUTTON = "Measure attention memory"


@empty_state(f"Press “{PREFILL_BUTTON}”: one prefill at each prompt length, up to the model's "
             "context window.")
def prefill_lengths_figure(points, curve=None, shares=(), caption: str = "") -> go.Figure:
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
        fig.add_trace(style.line_trace(
            line, [curve.at(x) / x * 1000 for x in line],
            f"fit a + b·L + c·L², per token ({THEORETICAL}, least squares)", PALETTE["orange"],
            mode="lines"))
        fig.add_trace(style.line_trace(
            line, [(curve.a + curve.b * x) / x * 1000 for x in line],
            "the same fit without its L² term (attention's scores)", PALETTE["grey"], width=2,
            dash="dash", mode="lines"))
    fig.update_xaxes(type="log")
    return styled(fig, "Prefill time per prompt token", "prompt length L (tokens, log)",
                  "ms per prompt token", caption, height=420,
                  note="Time per prompt token at each prompt length.")


@empty_state(f"Press “{DECODE_BUTTON}”: one decode step at each cache length, batch 1 and batch 8.")
def decode_lengths_figure(points, theory=None, window: int = 0, caption: str = "") -> go.Figure:
    batches = sorted({p.batch for p in points})
    right = max([window] + [p.cache_tokens for p in points])
    if theory is not None:
        stars = [theory.crossover_tokens(b) for b in batches]
        right = max([right] + [s for s in stars if s <= 2 * max(window, 1)])
    fig = go.Figure()
    for b in batches:
        colour = {1: PALETTE["blue"], 8: PALETTE["vermillion"]}.get(b, PALETTE["green"])
        mine = sorted((p for p in points if p.batch == b), key=lambda p: p.cache_tokens)
        fig.add_trace(style.line_trace(
            [p.cache_tokens for p in mine], [p.seconds * 1000 for p in mine],
            f"batch {b}: one step ({MEASURED}, median)", colour, marker=dict(size=9),
            error_y=dict(type="data", symmetric=False,
                         array=[(p.seconds_max - p.seconds) * 1000 for p in mine],
                         arrayminus=[(p.seconds - p.seconds_min) * 1000 for p in mine])))
        if theory is None:
            continue
        line = [round(right * i / 32) for i in range(33)]
        fig.add_trace(style.line_trace(
            line, [theory.seconds(x, b) * 1000 for x in line],
            f"batch {b}: floor ({THEORETICAL}: (weights + {b}·L·kv) ÷ "
            f"{theory.bandwidth_gbs:.1f} GB/s)", colour, width=2, dash="dash", mode="lines"))
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
