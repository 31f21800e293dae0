"""Where a server step's token budget and time go (chunked prefill).

Chunked prefill gives each step a token budget: every running row's one decode token first,
then newcomers' prompt chunks with the rest, so a long prompt shows up as a run of steps whose
prefill part fills the budget while the decode part never drops to zero (the running streams
keep going). Pure: `StepRecord`s, read by attribute, in; Plotly figures out.
"""
from __future__ import annotations

import plotly.graph_objects as go

from .style import MEASURED, PALETTE, empty_figure, styled

EMPTY = ("No server steps yet: ask something in “Try it”, then each step's split between "
         "decode tokens and prompt chunks appears here.")
PARTS = (("forward_s", "forward pass", PALETTE["blue"]),
         ("cache_s", "cache work (blocks, tables)", PALETTE["orange"]),
         ("sample_s", "sampling + detokenizing", PALETTE["green"]),
         ("handoff_s", "handing events to handlers", PALETTE["vermillion"]),
         ("other_s", "the loop's own Python", PALETTE["grey"]))


def budget_split_figure(steps, budget: int, caption: str = "") -> go.Figure:
    """Stacked bars per step: decode tokens (one per running row) and prefill-chunk tokens;
    a dashed line at the budget (none when unchunked, budget 0)."""
    if not steps:
        return empty_figure(EMPTY)
    x = [s.index for s in steps]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=x, y=[s.decode_tokens for s in steps], name="decode tokens "
                         "(running rows)", marker_color=PALETTE["blue"]))
    fig.add_trace(go.Bar(x=x, y=[s.prefill_tokens for s in steps], name="prefill-chunk tokens "
                         "(newcomers' prompts)", marker_color=PALETTE["orange"]))
    if budget:
        fig.add_trace(go.Scatter(x=[x[0] - 0.5, x[-1] + 0.5], y=[budget, budget], mode="lines",
                                 name=f"token budget per step ({budget})",
                                 line=dict(color=PALETTE["grey"], dash="dash")))
    fig.update_layout(barmode="stack", bargap=0.1)
    note = (f"Each step's budget of {budget} tokens: running rows first, prompt chunks after."
            if budget else "Unchunked: a newcomer's whole prompt runs in one step.")
    return styled(fig, "Tokens in each server step", "server step", "tokens in the step", caption,
                  note=note)


def step_parts_figure(steps, caption: str = "") -> go.Figure:
    """Stacked bars per step of its measured parts, in ms."""
    if not steps:
        return empty_figure(EMPTY)
    x = [s.index for s in steps]
    fig = go.Figure()
    for field, name, colour in PARTS:
        fig.add_trace(go.Bar(x=x, y=[getattr(s, field) * 1000 for s in steps],
                             name=f"{name} ({MEASURED})", marker_color=colour))
    fig.update_layout(barmode="stack", bargap=0.1)
    return styled(fig, "Where each step's time goes", "server step", "milliseconds", caption)
