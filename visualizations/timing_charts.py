"""Timing charts for Lessons 2 and 3: prefill vs sequential, and per-token latency."""
from __future__ import annotations

import plotly.graph_objects as go

from .style import PALETTE, empty_state, integer_ticks, line_trace, styled


@empty_state("Press “Run the sweep” to measure prefill against one-at-a-time.")
def prefill_sweep_figure(points, caption: str) -> go.Figure:
    """Both ways against the prompt length (`.sequential_measured` False: extrapolated)."""
    meas = [p for p in points if p.sequential_measured]
    extra = [p for p in points if not p.sequential_measured]
    fig = go.Figure([
        line_trace([p.tokens for p in points], [p.parallel_seconds * 1000 for p in points],
                   "prefill: all tokens in one pass (measured)", PALETTE["blue"]),
        line_trace([p.tokens for p in meas], [p.sequential_seconds * 1000 for p in meas],
                   "one token per pass (measured)", PALETTE["vermillion"])])
    if extra:
        tail = meas[-1:] + extra
        fig.add_trace(line_trace(
            [p.tokens for p in tail], [p.sequential_seconds * 1000 for p in tail],
            "one token per pass (extrapolated: ms/token × N)", PALETTE["vermillion"], width=2,
            dash="dash", marker=dict(symbol="circle-open")))
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log")
    return styled(fig, "Prefill is parallel", "prompt length (tokens, log scale)",
                  "time (ms, log scale)", caption, note="N prompt tokens in one forward pass.")


@empty_state("Press Step or Play: each token's time appears here.")
def decode_latency_figure(step_seconds: list[float], caption: str,
                          forced: list[int] | tuple[int, ...] = ()) -> go.Figure:
    """Per-token latency bars and running tokens/s; `forced` steps purple, not counted."""
    idx = list(range(len(step_seconds)))
    skip = set(forced) | {0}
    fig = go.Figure()
    # short names: two legend rows on a phone, so Step and both charts fit a 1280×720 screen
    kinds = (("first token, with prefill", PALETTE["orange"], lambda i: i == 0),
             ("decode step", PALETTE["blue"], lambda i: i not in skip),
             ("your branch pick", PALETTE["purple"], lambda i: i in skip and i))
    for name, colour, member in kinds:  # one trace per colour: each legend entry is its bars
        mine = [i for i in idx if member(i)]
        if mine:
            fig.add_trace(go.Bar(x=mine, y=[step_seconds[i] * 1000 for i in mine], name=name,
                                 marker_color=colour))
    rates, total, counted = [], 0.0, 0
    for i, s in enumerate(step_seconds):
        if i not in skip:
            total, counted = total + s, counted + 1
        rates.append(counted / total if counted and total else None)
    fig.add_trace(line_trace(idx, rates, "tokens/s so far", PALETTE["green"], mode="lines",
                             yaxis="y2", showlegend=False))
    fig.update_layout(yaxis2=dict(title="tokens/s so far (line)", overlaying="y", side="right",
                                  rangemode="tozero", showgrid=False), bargap=0.15,
                      barmode="overlay")
    integer_ticks(fig, len(step_seconds), range=[-0.5, len(step_seconds) - 0.5])
    return styled(fig, "Time per output token", "output token #", "latency (ms, measured)",
                  caption)


@empty_state("Press Step or Play: the likeliest next tokens appear here.")
def candidates_figure(candidates, chosen_id: int | None, shaped: list[float] | None,
                      caption: str = "", step: int | None = None) -> go.Figure:
    """Top-k candidates' probabilities, before and after sampling settings (`shaped`)."""
    labels = [f"{repr(c.piece)[1:-1] or '∅'}  #{c.token_id}" for c in candidates][::-1]
    raw = [c.raw_probability * 100 for c in candidates][::-1]
    edge = [PALETTE["vermillion"] if c.token_id == chosen_id else "rgba(0,0,0,0)"
            for c in candidates][::-1]
    fig = go.Figure(go.Bar(y=labels, x=raw, orientation="h", name="model's probability (T = 1)",
                           marker=dict(color=PALETTE["sky"], line=dict(color=edge, width=3)),
                           text=[f"{v:.1f}%" for v in raw], textposition="outside"))
    if shaped is not None:
        sh = [v * 100 for v in shaped][::-1]
        fig.add_trace(go.Bar(y=labels, x=sh, orientation="h", name="after your sampling settings",
                             marker=dict(color=PALETTE["orange"]),
                             text=[f"{v:.1f}%" for v in sh], textposition="outside"))
    fig.update_layout(barmode="group")
    fig.update_xaxes(range=[0, 115])
    which = "this token" if step is None else f"step {step}"
    return styled(fig, f"Candidates at {which}", "probability (%)", "", caption, height=420,
                  note="Red outline: the token picked.")
