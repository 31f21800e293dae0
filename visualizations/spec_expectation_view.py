"""Lesson 3b's expected-value view: the formula's tokens per pass and speed-up at every k,
drawn from one race's α and times, beside what the race (and a k sweep, if one was run on the
same prompt) measured; and the sampled acceptance rule's count at a temperature. Pure:
records in (`inference/experiments/spec_expectation.py`, read by attribute), plotly and
markdown out.
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .cards import times
from .noise_view import busy_notice_html, supports_verdict, withheld
from .style import PALETTE, empty_figure, styled

EMPTY_EXPECTATION = ("Race first: the formula takes α (the share of judged guesses kept) and "
                     "the step, draft and check times from your last race.")
EMPTY_SAMPLED = ("*Press **Count at this temperature**: one seeded run with the sampled rule, "
                 "its guesses kept ÷ judged.*")
FORMULAS = ("E[tokens per pass] = (1 − α^(k+1)) ÷ (1 − α) · "
            "speed-up = E × T_step ÷ (k·T_draft + T_verify)")


def _mine(points, draft: str) -> list:
    return sorted((p for p in points or () if p.draft == draft), key=lambda p: p.k)


def expectation_title(e) -> str:
    """The formula's best k and whether it pays (theoretical), in one short line."""
    b = e.best
    if not supports_verdict(e.reading):
        return "Formula beside your race"
    if e.verdict == "faster":
        return f"Formula: k = {b.k} is best ({times(b.speedup)})"
    if e.verdict == "slower":
        return f"Formula: no k pays (best {times(b.speedup)})"
    return f"Formula: k = {b.k}, within noise"


def expectation_figure(e, sweep_points=(), caption: str = "") -> go.Figure:
    """Two panels against k: tokens per pass and speed-up, the formula as a dashed line
    (theoretical), the race's k and any sweep points of the same draft as markers (measured)."""
    if e is None:
        return empty_figure(EMPTY_EXPECTATION)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, subplot_titles=(
        "Tokens per pass", "Speed-up over plain decode"))
    ks = [r.k for r in e.rows]
    dashed = dict(color=PALETTE["blue"], dash="dash", width=3)
    for col, ys in ((1, [r.tokens_per_pass for r in e.rows]), (2, [r.speedup for r in e.rows])):
        fig.add_trace(go.Scatter(x=ks, y=ys, name="formula (theoretical)", mode="lines",
                                 line=dashed, showlegend=col == 1, legendgroup="formula"),
                      row=1, col=col)
    sweep = _mine(sweep_points, e.fit.draft)
    if sweep:
        for col, ys in ((1, [p.tokens_per_pass for p in sweep]), (2, [p.speedup for p in sweep])):
            fig.add_trace(go.Scatter(x=[p.k for p in sweep], y=ys, mode="markers",
                                     name="k sweep (measured)", showlegend=col == 1,
                                     marker=dict(color=PALETTE["grey"], size=9),
                                     legendgroup="sweep"), row=1, col=col)
    for col, y in ((1, e.fit.tokens_per_pass), (2, e.fit.speedup)):
        fig.add_trace(go.Scatter(x=[e.fit.k], y=[y], mode="markers", name="your race (measured)",
                                 showlegend=col == 1, legendgroup="race",
                                 marker=dict(color=PALETTE["orange"], size=14, symbol="diamond")),
                      row=1, col=col)
    fig.add_hline(y=1, line=dict(color=PALETTE["grey"], dash="dot"), row=1, col=2)
    fig.update_xaxes(title_text="k (guesses per pass)", dtick=1)
    fig.update_yaxes(rangemode="tozero")
    return styled(fig, expectation_title(e), "", "", caption, height=420,
                  note=f"Theoretical lines from your race's α = {e.fit.alpha:.2f} and times "
                       f"(draft {e.fit.draft}, batch 1); markers measured.")


def expectation_md(e, sweep_points=()) -> str:
    """The formula with this race's numbers, beside the measurement; the best k; assumptions."""
    if e is None:
        return f"*{EMPTY_EXPECTATION}*"
    f, r = e.fit, e.raced
    kept = (f"α = **{f.alpha:.2f}**, measured: the model kept {f.kept} of the "
            f"{f.judged} guesses it judged" if f.judged else
            "α = 0: the draft made no guess in this race")
    lines = [
        busy_notice_html(e.reading) + f"**{FORMULAS}** (theoretical).",
        f"{kept}. At your k = {f.k}: E = **{r.tokens_per_pass:.2f}** tokens per pass by the "
        f"formula, **{f.tokens_per_pass:.2f}** measured; speed-up {r.speedup:.2f}× by the "
        f"formula ({r.tokens_per_pass:.2f} × {f.step_s * 1000:.0f} ms ÷ ({f.k} × "
        f"{f.draft_s * 1000:.1f} ms + {f.verify_s * 1000:.0f} ms)), {times(f.speedup)} measured.",
        _best_sentence(e),
    ]
    sweep = _mine(sweep_points, f.draft)
    if sweep:
        top = max(sweep, key=lambda p: p.speedup)
        lines.append(f"The k sweep on this prompt measured its best at k = {top.k} "
                     f"({times(top.speedup)}).")
    lines.append("*Assumed: every pass proposes k guesses (prompt lookup sometimes has fewer), "
                 "each kept at the same rate α, independently (real text has easy and hard "
                 "stretches), and the check's time grows in a straight line from a plain step "
                 "(k = 0) to this race's pass. Batch 1, this race's times.*")
    return "  \n".join(lines)


def _best_sentence(e) -> str:
    b = e.best
    if not supports_verdict(e.reading):
        return (f"By the formula k = {b.k} gives the most, {times(b.speedup)} "
                f"(theoretical, from this race's times; {withheld(e.reading)}).")
    if e.verdict == "faster":
        return (f"By the formula the best k here is **{b.k}**: {times(b.speedup)} plain "
                "decoding (theoretical).")
    if e.verdict == "slower":
        return (f"By the formula **no k from {e.rows[0].k} to {e.rows[-1].k} pays here**: the "
                f"best, k = {b.k}, gives {times(b.speedup)} (theoretical): the draft's steps and "
                "the check cost more than the passes saved.")
    return (f"By the formula the best k is {b.k}, at {times(b.speedup)}: within this race's "
            f"noise (±{e.fit.noise:.0%}) of plain decoding (theoretical).")


def sampled_md(run, greedy_alpha: float | None = None) -> str:
    """The sampled rule's count at a temperature, E from its α beside its measured tokens per
    pass, and the greedy race's α when there is one for the same draft."""
    if run is None:
        return EMPTY_SAMPLED
    rule = ("Greedy rule: keep a guess if it is the model's top pick" if run.temperature == 0
            else f"Sampled rule at temperature {run.temperature:g}: keep with probability "
                 "min(1, p ÷ q)")
    if not run.judged:
        return f"{rule}: the draft made no guess in {run.passes} passes, so α cannot be counted."
    out = (f"{rule}: **{run.accepted} of {run.judged}** judged guesses kept, **α = "
           f"{run.alpha:.2f}** (measured, seed {run.seed}, draft {run.draft}). E at k = "
           f"{run.k}: **{run.expected_tokens_per_pass:.2f}** tokens per pass (theoretical); "
           f"this run made **{run.tokens_per_pass:.2f}** (measured, {run.passes} passes).")
    if greedy_alpha is not None:
        out += f" Your greedy race with this draft: α = {greedy_alpha:.2f}."
    return out
