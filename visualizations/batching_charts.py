"""Lesson 5 charts: batch sweep, throughput/latency trade-off, padding, schedulers, cost."""
from __future__ import annotations

import math

import plotly.graph_objects as go

from .noise_view import supports_verdict
from .style import PALETTE, empty_state, integer_ticks, line_trace, styled


def log_ticks(low: float, high: float) -> list[float]:
    """1-2-5 tick values covering [low, high] for a log axis (readable labels, no clutter)."""
    if low <= 0 or high <= 0:
        return []
    decades = range(math.floor(math.log10(low)), math.floor(math.log10(high)) + 2)
    return [m * 10 ** k for k in decades for m in (1, 2, 5) if low / 2 <= m * 10 ** k <= high * 2]


def _log_y(fig: go.Figure, values: list[float], headroom: float = 0.25) -> go.Figure:
    """Log y axis with 1-2-5 ticks and room above the tallest value for its label."""
    lo, hi = min(values), max(values)
    ticks = log_ticks(lo, hi)
    fig.update_yaxes(type="log", tickvals=ticks, ticktext=[f"{t:g}" for t in ticks],
                     range=[math.log10(lo) - 0.15, math.log10(hi) + headroom])
    return fig


def throughput_title(points, noise=None) -> str:
    """The throughput chart's verdict, worded from the data only on a quiet run."""
    neutral = "Decode throughput against batch size"
    if any(p.impossible for p in points):
        return neutral + " (an impossible figure: see the notes)"
    if not supports_verdict(noise) or len(points) < 2:
        return neutral + (" (machine busy: noisy)" if noise is not None and noise.busy else "")
    return {"grows": "Decode throughput grows with batch size",
            "fell": "Decode throughput fell with batch size on this run",
            "levelled": "Decode throughput rose, then levelled off, with batch size",
            }[throughput_trend(points)]


def throughput_trend(points) -> str:
    """"grows" (up at every batch step), "fell" (largest batch below smallest) or "levelled"."""
    rates = [p.tokens_per_s for p in sorted(points, key=lambda p: p.batch)]
    return ("grows" if all(b > a for a, b in zip(rates, rates[1:])) else
            "fell" if rates[-1] < rates[0] else "levelled")


@empty_state("Press “Run sweep” to measure decode at each batch size.")
def throughput_chart(points, caption: str = "", noise=None) -> go.Figure:
    b = [p.batch for p in points]
    one = points[0].tokens_per_s / points[0].batch
    fig = go.Figure([
        line_trace(b, [p.tokens_per_s for p in points], "all requests (measured)", PALETTE["blue"]),
        line_trace(b, [p.per_request_tokens_per_s for p in points], "each request (measured)",
                   PALETTE["orange"]),
        line_trace(b, [one * x for x in b], "B × batch 1 (theoretical)", PALETTE["grey"],
                   width=2, dash="dash", mode="lines")])
    # every point inside, the top third left free for the legend
    _log_y(fig, [y for trace in fig.data for y in trace.y], 0.75)
    fig.update_xaxes(type="log", tickvals=b, ticktext=[str(x) for x in b])  # 1, 2, 4, … evenly
    return styled(fig, "Throughput vs batch size", "Batch size (requests)",
                  "Tokens per second (log scale)", caption,
                  height=350,  # with Run sweep and the cards above it on a 1280×720 screen
                  note=throughput_title(points, noise) + ".", legend_inside=True)


@empty_state("Step times appear here as the sweep runs.")
def step_time_chart(points, bandwidth_gbs: float, caption: str = "") -> go.Figure:
    b = [str(p.batch) for p in points]
    first = points[0].step_seconds * 1000
    fig = go.Figure([
        go.Bar(x=b, y=[p.step_seconds * 1000 for p in points], name="median step (measured)",
               marker_color=PALETTE["blue"], textposition="outside",
               text=[f"{p.step_seconds * 1000:.0f}" for p in points]),
        line_trace(b, [p.floor_seconds(bandwidth_gbs) * 1000 for p in points],
                   f"bytes read ÷ {bandwidth_gbs:.1f} GB/s (theoretical)", PALETTE["green"]),
        line_trace(b, [first * p.batch / points[0].batch for p in points],
                   "time × batch (theoretical)", PALETTE["grey"], width=2, dash="dash",
                   mode="lines")])
    top = max(max(p.step_seconds * 1000 for p in points) * 1.3, first * 1.2)
    fig.update_yaxes(range=[0, top])
    return styled(fig, "Time per step vs batch size", "Batch size (requests)",
                  "Milliseconds per decode step", caption,
                  note="One step serves the whole batch.")


@empty_state("The trade-off curve appears after the sweep.")
def tradeoff_chart(points, caption: str = "") -> go.Figure:
    fig = go.Figure(line_trace(
        [p.step_seconds * 1000 for p in points], [p.tokens_per_s for p in points], "measured",
        PALETTE["vermillion"], mode="lines+markers+text", text=[f"B={p.batch}" for p in points],
        textposition="top left", marker=dict(size=10)))
    fig.update_yaxes(range=[0, max(p.tokens_per_s for p in points) * 1.2])
    return styled(fig, "Throughput vs latency", "Each request's time per output token (ms, "
                  "lower is snappier)", "Total tokens/s (higher is cheaper)", caption,
                  note="What batching trades.")


@empty_state("Type a few prompts, one per line.")
def padding_chart(lengths: list[int], labels: list[str] | None = None) -> go.Figure:
    width = max(lengths)
    labels = labels or [f"request {i + 1}" for i in range(len(lengths))]
    z = [[0] * (width - n) + [1] * n for n in lengths]
    padded, total = sum(width - n for n in lengths), width * len(lengths)
    rows = [f"row {i + 1} · {n} tokens" for i, n in enumerate(lengths)]
    fig = go.Figure(go.Heatmap(
        z=z, y=rows, x=list(range(1, width + 1)), zmin=0, zmax=1, showscale=False, xgap=1, ygap=3,
        colorscale=[[0, PALETTE["grey"]], [0.5, PALETTE["grey"]], [0.5, PALETTE["blue"]],
                    [1, PALETTE["blue"]]],
        customdata=[[lab] * width for lab in labels],
        hovertemplate="%{customdata}<br>position %{x}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    integer_ticks(fig, width, start=1)
    return styled(fig, "Padding", "Position (tokens)", "",
                  "blue: prompt tokens · grey: padding (computed, masked out)",
                  height=max(320, 180 + 44 * len(lengths)),
                  note=f"{padded} of {total} positions are filler ({padded / total:.0%}).")


@empty_state("Press “Serve the workload” to run both schedulers.")
def gantt_chart(result, title: str, caption: str = "", horizon: float | None = None) -> go.Figure:
    slot_end: dict[int, float] = {}  # when the last pass that carried each request's row ended
    for s in result.steps:
        for rid in s.rows:
            slot_end[rid] = max(slot_end.get(rid, 0.0), s.start + s.seconds)
    reqs = result.requests
    names = [f"req {r.rid}" for r in reqs]
    parts = [("waiting in queue", PALETTE["grey"], [(r.arrival, r.start) for r in reqs]),
             ("prefill → first token", PALETTE["orange"], [(r.start, r.first_token) for r in reqs]),
             ("decoding", PALETTE["blue"], [(r.first_token, r.finish) for r in reqs]),
             ("done, slot still busy", PALETTE["vermillion"],
              [(r.finish, max(r.finish, slot_end.get(r.rid, r.finish))) for r in reqs])]
    fig = go.Figure()
    for name, colour, spans in parts:
        fig.add_bar(y=names, x=[b - a for a, b in spans], base=[a for a, _ in spans],
                    orientation="h", name=name, marker_color=colour,
                    hovertemplate="%{base:.2f} s → +%{x:.2f} s<extra>" + name + "</extra>")
    fig.add_scatter(y=names, x=[r.arrival for r in reqs], mode="markers",
                    name="arrival", marker=dict(symbol="line-ns-open", size=14, color="black"))
    fig.update_layout(barmode="overlay")
    fig.update_yaxes(autorange="reversed")
    if horizon:
        fig.update_xaxes(range=[0, horizon])
    return styled(fig, title, "Virtual clock (s): sum of measured step times", "", caption,
                  height=max(300, 110 + 28 * len(names)))


@empty_state("Latency figures appear after both schedulers have run.")
def scheduler_summary_chart(summaries, caption: str = "") -> go.Figure:
    metrics = [("mean latency", "mean_latency"), ("p95 latency", "p95_latency"),
               ("mean TTFT", "mean_ttft"), ("p95 TTFT", "p95_ttft")]
    colours = [PALETTE["vermillion"], PALETTE["green"], PALETTE["blue"]]
    fig = go.Figure([go.Bar(x=[m for m, _ in metrics], y=[getattr(s, a) for _, a in metrics],
                            name=f"{s.scheduler} (measured)", marker_color=colours[i % 3],
                            text=[f"{getattr(s, a):.2f}" for _, a in metrics],
                            textposition="outside")
                     for i, s in enumerate(summaries)])
    top = max(getattr(s, a) for s in summaries for _, a in metrics)
    fig.update_yaxes(range=[0, top * 1.2 if top > 0 else 1])
    return styled(fig, "Static vs continuous", "", "Seconds on the virtual clock", caption,
                  note="How long requests wait.")


@empty_state("Run the batch sweep: costs are computed from its measured throughput.")
def cost_chart(costs, price_per_hour: float, caption: str = "") -> go.Figure:
    b = [str(c.batch) for c in costs]
    context = costs[0].context_tokens
    output_name = (f"output tokens (estimate: measured decode carried to {context:,.0f} "
                   "tokens of context)" if context else "output tokens (from measured decode)")
    fig = go.Figure([
        go.Bar(x=b, y=[c.usd_per_million_output for c in costs], name=output_name,
               marker_color=PALETTE["vermillion"], textposition="outside",
               text=[f"${c.usd_per_million_output:,.2f}" for c in costs]),
        go.Bar(x=b, y=[c.usd_per_million_input for c in costs],
               name="input tokens (from measured prefill)", marker_color=PALETTE["sky"])])
    _log_y(fig, [y for trace in fig.data for y in trace.y])
    return styled(fig, f"Cost at ${price_per_hour:,.2f} per hour", "Batch size (requests)",
                  "US dollars per million tokens (log scale)", caption,
                  note="What a million tokens cost at each batch size.")
