"""The speculative-decoding lesson's charts: the k sweep for both drafts, and the cost of a
verification pass against a plain step at batch 1 and batch 16. Pure: `SpecRaceSummary` and
`VerifyCost` records in (read by attribute), plotly figures and markdown out.
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .cards import times
from .noise_view import busy_notice_html, supports_verdict, withheld
from .style import PALETTE, SEQUENCE, empty_figure, styled

EMPTY_SWEEP = "Press “Sweep k” to race both drafts at k = 1 to 8."
EMPTY_BATCH = "Press “Measure at batch 1 and 16” to time a verification pass against a step."


def sweep_title(points, noise=None) -> str:
    """The best measured (draft, k) and whether it beat plain decoding, on a quiet run."""
    if not supports_verdict(noise):
        busy = noise is not None and noise.busy
        return "Speed-up over plain decoding at each k" + (" (machine busy: noisy)" if busy
                                                           else "")
    best = max(points, key=lambda p: p.speedup)
    if best.verdict == "faster":
        return f"Best here: {best.draft} at k = {best.k}, {times(best.speedup)} plain decoding"
    return (f"No draft beat plain decoding beyond noise here (best {best.draft}, k = {best.k}: "
            f"{times(best.speedup)})")


def k_sweep_figure(points, caption: str = "", noise=None) -> go.Figure:
    """Two panels against k: tokens per pass, and speed-up over plain decoding (both measured),
    one line per draft; a dashed line marks 1 (plain decoding) in each."""
    if not points:
        return empty_figure(EMPTY_SWEEP)
    judged = supports_verdict(noise)
    # one panel above the other, each named by its y axis: side by side, a phone's panels were
    # 120 px wide under titles that ran into each other
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    drafts = list(dict.fromkeys(p.draft for p in points))
    for i, d in enumerate(drafts):
        mine = sorted((p for p in points if p.draft == d), key=lambda p: p.k)
        colour = SEQUENCE[i % len(SEQUENCE)]
        ks = [p.k for p in mine]
        fig.add_trace(go.Scatter(x=ks, y=[p.tokens_per_pass for p in mine], name=d,
                                 mode="lines+markers", line=dict(color=colour, width=3),
                                 legendgroup=d), row=1, col=1)
        fig.add_trace(go.Scatter(x=ks, y=[p.speedup for p in mine], name=d, showlegend=False,
                                 mode="lines+markers", line=dict(color=colour, width=3),
                                 legendgroup=d,
                                 customdata=[p.verdict if judged else "measured" for p in mine],
                                 hovertemplate="k = %{x}: %{y:.2f}× (%{customdata})"
                                               "<extra></extra>"), row=2, col=1)
    for row in (1, 2):
        fig.add_hline(y=1, line=dict(color=PALETTE["grey"], dash="dash"), row=row, col=1)
    fig.update_xaxes(dtick=1)
    fig.update_yaxes(rangemode="tozero")
    fig = styled(fig, "Speed-up at each k", "", "tokens per pass", caption, height=460,
                 note=sweep_title(points, noise) + ". Both panels measured.")
    fig.update_yaxes(title_text="× plain decode", row=2, col=1)
    fig.update_xaxes(title_text="k (guesses per pass)", row=2, col=1)
    fig.update_layout(height=fig.layout.height + 180)  # two panels: room for the second
    return fig


def batch_figure(costs, caption: str = "") -> go.Figure:
    """Per batch size: a plain step (B × 1 tokens) and a verification pass (B × (k + 1)),
    measured milliseconds, the pass's cost in plain steps written on its bar."""
    if not costs:
        return empty_figure(EMPTY_BATCH)
    xs = [f"batch {c.batch}" for c in costs]
    fig = go.Figure([
        go.Bar(x=xs, y=[c.plain_seconds * 1000 for c in costs], name="plain step: B × 1 tokens",
               marker_color=PALETTE["blue"],
               text=[f"{c.plain_seconds * 1000:.0f} ms" for c in costs], textposition="outside"),
        go.Bar(x=xs, y=[c.verify_seconds * 1000 for c in costs],
               name=f"verification pass: B × {costs[0].k + 1} tokens",
               marker_color=PALETTE["orange"], textposition="outside",
               text=[f"{c.verify_seconds * 1000:.0f} ms ({c.cost_ratio:.1f} steps)"
                     for c in costs])])
    fig.update_layout(barmode="group")
    fig.update_yaxes(rangemode="tozero")
    last = costs[-1]
    title = (f"At batch {last.batch}, checking {last.k} guesses costs {last.cost_ratio:.1f} "
             f"plain steps (batch {costs[0].batch}: {costs[0].cost_ratio:.1f})")
    return styled(fig, "Verification pass vs step", "", "Time (ms, measured)", caption,
                  height=420, note=title + ".")


def batch_md(costs, tokens_per_pass: float | None, noise=None) -> str:
    """A table of the costs, the derived speed-ups, and what bounds each pass."""
    if not costs:
        return ""
    judged = supports_verdict(noise)
    lines = ["| batch | plain step (ms) | verification pass (ms) | pass ÷ step | bound: step, pass "
             "| speed-up (derived) |", "|---|---|---|---|---|---|"]
    for c in costs:
        derived = times(c.derived_speedup(tokens_per_pass)) if tokens_per_pass else "—"
        lines.append(f"| {c.batch} | {c.plain_seconds * 1000:.1f} | {c.verify_seconds * 1000:.1f}"
                     f" | {c.cost_ratio:.2f} | {_bounds(c) if judged else '— (noisy)'} "
                     f"| {derived} |")
    notes = [_bound_sentence(c, noise) for c in costs]
    how = ("*Speed-up derived, not raced: tokens per pass from the batch-1 race "
           f"({tokens_per_pass:.2f}) × plain step ÷ verification pass, both measured at that "
           "batch; it assumes every row keeps as many guesses and a draft that costs nothing "
           "(prompt lookup).*" if tokens_per_pass else
           "*Race first: the derived speed-up needs the race's tokens per pass.*")
    return (busy_notice_html(noise) + "\n".join(lines) + "\n\n" + "  \n".join(notes) + "\n\n"
            + how)


def _bounds(c) -> str:
    return f"{c.plain_bound or '—'}, {c.verify_bound or '—'}"


def _bound_sentence(c, noise=None) -> str:
    """What this batch size's pass costs, and the roof the record says bounds it."""
    tokens = c.batch * (c.k + 1)
    if not supports_verdict(noise):
        return (f"Batch {c.batch}: a pass of {tokens} tokens cost **{c.cost_ratio:.2f}×** a "
                f"plain step of {c.batch}, measured ({withheld(noise)} on what bounds it).")
    if c.verify_bound == "compute":
        why = ("its arithmetic, not the reading of the weights, sets its pace (right of the "
               "ridge): the extra tokens are paid for")
    elif c.verify_bound == "memory":
        why = ("it still mostly waits for the weights to be read (left of the ridge), so "
               "the extra tokens ride along on the same read")
    else:
        why = ("it reached under half of both measured roofs, so neither the reading of the "
               "weights nor the arithmetic sets its pace; the ratio is what the extra tokens "
               "cost here")
    return (f"Batch {c.batch}: a pass of {tokens} tokens cost **{c.cost_ratio:.2f}×** a plain "
            f"step of {c.batch}; by the roofline {why}.")
