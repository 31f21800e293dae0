"""Speculative decoding: each verification pass as chips (kept ✓, first rejected ✗, unused, the
model's own ★), the race, the k sweep, a pass against a plain step, and the formula beside them."""
from __future__ import annotations

import html

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .cards import Card, cards_html, md_table, times
from .glossary import NOTES
from .noise_view import busy_notice_html, supports_verdict, withheld
from .style import PALETTE, SEQUENCE, empty_state, styled
from .token_view import chip, shown_piece

KEPT, REJECTED, UNUSED, MODEL = "#bfe6d8", "#f3cdb5", "#e6e6e6", "#cfe3f1"
EMPTY_PASSES = f"<div class='lab-tokens lab-empty'>{NOTES['spec_passes_waiting']}</div>"
EMPTY_RACE = NOTES["spec_race_waiting"]


def pass_row_html(p) -> str:
    chips = []
    for i, piece in enumerate(p.proposed_pieces):
        mark, said, tint = (
            ("✓", "kept", KEPT) if i < p.accepted else
            ("✗", "rejected, replaced by the model's token", REJECTED) if i == p.accepted else
            ("", "not used (after a rejection)", UNUSED))
        chips.append(chip(mark + shown_piece(piece), f"guess {i + 1}: {said}", tint,
                          i == p.accepted))
    if p.model_token is not None:
        chips.append(chip("★" + shown_piece(p.model_piece), "the model's own token from this pass",
                          MODEL, False))
    what = ("prefill (the prompt in one pass; no guesses)" if p.index == 0 else
            "no guess: a plain decode step" if not p.proposed_pieces else
            f"{len(p.proposed_pieces)} guesses, {p.accepted} kept")
    end = f" · {html.escape(p.finished)}" if p.finished else ""
    return (f"<div class='lab-spec-pass'><b>Pass {p.index}</b> · {what} "
            f"<div class='lab-tokens'>{''.join(chips)}</div>"
            f"<span>+{p.gained} token{'s' if p.gained != 1 else ''} · "
            f"{p.seconds * 1000:.0f} ms (draft {p.draft_seconds * 1000:.0f} ms, model pass "
            f"{p.verify_seconds * 1000:.0f} ms, measured){end}</span></div>")


def passes_html(passes, last: int = 12) -> str:
    if not passes:
        return EMPTY_PASSES
    hidden = len(passes) - last
    more = f"<div><i>{hidden} earlier passes not shown</i></div>" if hidden > 0 else ""
    return "<div id='spec-passes'>" + more + "".join(pass_row_html(p) for p in passes[-last:]) \
        + "</div>"


def ceiling_sentence(s, noise=None) -> str:
    rate, ceiling_rate = s.tokens_per_s, s.ceiling_tokens_per_s
    ceiling = (f"the one-token ceiling of {ceiling_rate:.1f} tokens/s (theoretical: bandwidth ÷ "
               "bytes per token")
    if not supports_verdict(noise):
        where = f"this run {rate:.1f} tokens/s, {ceiling}; {withheld(noise)})"
    elif rate > ceiling_rate:
        where = f"**above** {ceiling}), which binds only decoding that makes one token per pass"
    else:
        where = (f"below {ceiling}; this run reached {rate / ceiling_rate:.0%} of it); at this "
                 "many tokens per pass, with the draft's own weight reads, it would be "
                 f"{s.pass_ceiling_tokens_per_s:.1f}")
    return f"**{s.tokens_per_pass:.2f} tokens per read of the weights**: {where}."


def verdict_sentence(s, noise=None) -> str:
    how = (f"speculative {s.tokens_per_s:.1f} tokens/s against plain "
           f"{s.plain_tokens_per_s:.1f} ({times(s.speedup)}; this run's noise ±{s.noise:.0%})")
    if not supports_verdict(noise):
        return f"Measured: {how}; {withheld(noise)}."
    if s.verdict == "faster":
        return f"Speculative decoding was **faster** here: {how}."
    if s.verdict == "slower":
        return (f"Speculative decoding was **slower** here: {how}. Its passes (the draft's "
                "guessing and the model's checking) cost more than the extra tokens saved.")
    return f"**No difference beyond this run's noise**: {how}."


def race_md(s, noise=None) -> str:
    if s is None or not s.new_tokens:
        return EMPTY_RACE
    same = "same tokens" if s.identical else "tokens differ"
    head = cards_html([
        Card("Tokens per pass", f"{s.tokens_per_pass:.2f}",
             f"measured, {s.passes} passes (plain: 1)"),
        Card("Speculative", f"{s.tokens_per_s:.1f} tok/s", f"measured, draft: {s.draft}, k={s.k}"),
        Card("Plain decode", f"{s.plain_tokens_per_s:.1f} tok/s", f"measured, {same}"),
        Card("Speed-up", times(s.speedup), s.verdict if supports_verdict(noise) else
             "noisy: run again" if noise is not None else "measured"),
        Card("Guesses kept", f"{s.acceptance:.0%}", f"{s.accepted} of {s.proposed}")])
    tokens = ("Both lanes made **the same tokens**" if s.identical else
              "**The lanes' tokens differ** (rounding tipped a near-tie)")
    return busy_notice_html(noise) + head + (
        f"{verdict_sentence(s, noise)}  \n{ceiling_sentence(s, noise)}  \n"
        + (f"{tokens} ({s.new_tokens} tokens after a {s.prompt_tokens}-token prompt; the first "
           "token, from the prefill, is not counted in tokens/s). The draft spent "
           f"{s.draft_seconds:.2f} s of the {s.spec_seconds:.2f} s."))
EMPTY_SWEEP = "Press “Sweep k” to race both drafts at k = 1 to 8."
EMPTY_BATCH = "Press “Measure at batch 1 and 16” to time a verification pass against a step."
EMPTY_EXPECTATION = ("Race first: the formula takes α (the share of judged guesses kept) and "
                     "the step, draft and check times from your last race.")
EMPTY_SAMPLED = ("*Press **Count at this temperature**: one seeded run with the sampled rule, "
                 "its guesses kept ÷ judged.*")


def sweep_title(points, noise=None) -> str:
    """The best measured (draft, k) and whether it beat plain decoding, on a quiet run."""
    if not supports_verdict(noise):  # busy, or not judged yet (no noise reading)
        busy = " (machine busy: noisy)" if noise is not None else ""
        return f"Speed-up over plain decoding at each k{busy}"
    best = max(points, key=lambda p: p.speedup)
    if best.verdict == "faster":
        return f"Best here: {best.draft} at k = {best.k}, {times(best.speedup)} plain decoding"
    return (f"No draft beat plain decoding beyond noise here (best {best.draft}, k = {best.k}: "
            f"{times(best.speedup)})")


@empty_state(EMPTY_SWEEP)
def k_sweep_figure(points, caption: str = "", noise=None) -> go.Figure:
    judged = supports_verdict(noise)
    # one panel above the other, each named by its y axis (side by side was too narrow on a phone)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    drafts = list(dict.fromkeys(p.draft for p in points))
    for i, d in enumerate(drafts):
        mine = _mine(points, d)
        ks = [p.k for p in mine]
        look = dict(mode="lines+markers", line=dict(color=SEQUENCE[i % len(SEQUENCE)], width=3),
                    legendgroup=d, name=d)
        fig.add_trace(go.Scatter(x=ks, y=[p.tokens_per_pass for p in mine], **look), row=1, col=1)
        fig.add_trace(go.Scatter(x=ks, y=[p.speedup for p in mine], showlegend=False, **look,
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


@empty_state(EMPTY_BATCH)
def batch_figure(costs, caption: str = "") -> go.Figure:
    xs = [f"batch {c.batch}" for c in costs]
    fig = go.Figure([
        go.Bar(x=xs, y=[c.plain_seconds * 1000 for c in costs], name="plain step: B × 1 tokens",
               marker_color=PALETTE["blue"], textposition="outside",
               text=[f"{c.plain_seconds * 1000:.0f} ms" for c in costs]),
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
    if not costs:
        return ""
    table = md_table(
        "batch | plain step (ms) | verification pass (ms) | pass ÷ step | bound: step, pass | "
        "speed-up (derived)",
        [[c.batch, f"{c.plain_seconds * 1000:.1f}", f"{c.verify_seconds * 1000:.1f}",
          f"{c.cost_ratio:.2f}", f"{c.plain_bound or '—'}, {c.verify_bound or '—'}"
          if supports_verdict(noise) else "— (noisy)",
          times(c.derived_speedup(tokens_per_pass)) if tokens_per_pass else "—"] for c in costs])
    how = ((f"*Speed-up derived, not raced: the batch-1 race's tokens per pass "
            f"({tokens_per_pass:.2f}) × plain step ÷ verification pass, both measured at that "
            "batch, assuming every row keeps as many guesses and a free draft (prompt lookup).*")
           if tokens_per_pass
           else "*Race first: the derived speed-up needs the race's tokens per pass.*")
    return (busy_notice_html(noise) + table + "\n\n"
            + "  \n".join(_bound_sentence(c, noise) for c in costs) + "\n\n" + how)


def _bound_sentence(c, noise=None) -> str:
    """What this batch size's pass costs, and the roof the record says bounds it."""
    cost = (f"Batch {c.batch}: a pass of {c.batch * (c.k + 1)} tokens cost "
            f"**{c.cost_ratio:.2f}×** a plain step of {c.batch}")
    if not supports_verdict(noise):
        return f"{cost}, measured ({withheld(noise)} on what bounds it)."
    why = {"compute": "its arithmetic, not the reading of the weights, sets its pace (right of "
                      "the ridge): the extra tokens are paid for",
           "memory": "it still mostly waits for the weights to be read (left of the ridge), so "
                     "the extra tokens ride along on the same read"}.get(
        c.verify_bound, "it reached under half of both measured roofs, so neither the reading of "
                        "the weights nor the arithmetic sets its pace; the ratio is what the extra "
                        "tokens cost here")
    return f"{cost}; by the roofline {why}."


def _mine(points, draft: str) -> list:
    return sorted((p for p in points or () if p.draft == draft), key=lambda p: p.k)


def expectation_verdict(e) -> tuple[str, str]:
    """(chart title, sentence): the formula's best k and whether it pays (theoretical)."""
    b = e.best
    if not supports_verdict(e.reading):
        return "Formula beside your race", (
            f"By the formula k = {b.k} gives the most, {times(b.speedup)} (theoretical, from this "
            f"race's times; {withheld(e.reading)}).")
    if e.verdict == "faster":
        return f"Formula: k = {b.k} is best ({times(b.speedup)})", (
            f"By the formula the best k here is **{b.k}**: {times(b.speedup)} plain decoding "
            "(theoretical).")
    if e.verdict == "slower":
        return f"Formula: no k pays (best {times(b.speedup)})", (
            f"By the formula **no k from {e.rows[0].k} to {e.rows[-1].k} pays here**: the best, "
            f"k = {b.k}, gives {times(b.speedup)} (theoretical): the draft's steps and the check "
            "cost more than the passes saved.")
    return f"Formula: k = {b.k}, within noise", (
        f"By the formula the best k is {b.k}, at {times(b.speedup)}: within this race's noise "
        f"(±{e.fit.noise:.0%}) of plain decoding (theoretical).")


@empty_state(EMPTY_EXPECTATION)
def expectation_figure(e, sweep_points=(), caption: str = "") -> go.Figure:
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, subplot_titles=(
        "Tokens per pass", "Speed-up over plain decode"))
    layers = (  # (legend name, group, points with .k, .tokens_per_pass and .speedup, style)
        ("formula (theoretical)", "formula", e.rows,
         dict(mode="lines", line=dict(color=PALETTE["blue"], dash="dash", width=3))),
        ("k sweep (measured)", "sweep", _mine(sweep_points, e.fit.draft),
         dict(mode="markers", marker=dict(color=PALETTE["grey"], size=9))),
        ("your race (measured)", "race", [e.fit],
         dict(mode="markers", marker=dict(color=PALETTE["orange"], size=14, symbol="diamond"))))
    for name, group, pts, style in layers:
        for col, ys in ((1, [p.tokens_per_pass for p in pts]), (2, [p.speedup for p in pts])):
            if pts:
                fig.add_trace(go.Scatter(x=[p.k for p in pts], y=ys, name=name, legendgroup=group,
                                         showlegend=col == 1, **style), row=1, col=col)
    fig.add_hline(y=1, line=dict(color=PALETTE["grey"], dash="dot"), row=1, col=2)
    fig.update_xaxes(title_text="k (guesses per pass)", dtick=1)
    fig.update_yaxes(rangemode="tozero")
    return styled(fig, expectation_verdict(e)[0], "", "", caption, height=420,
                  note=f"Theoretical lines from your race's α = {e.fit.alpha:.2f} and times "
                       f"(draft {e.fit.draft}, batch 1); markers measured.")


def expectation_md(e, sweep_points=()) -> str:
    """The formula with this race's numbers, beside the measurement; the best k; assumptions."""
    if e is None:
        return f"*{EMPTY_EXPECTATION}*"
    f, r = e.fit, e.raced
    kept = (f"α = **{f.alpha:.2f}**, measured: the model kept {f.accepted} of the "
            f"{f.judged} guesses it judged" if f.judged else
            "α = 0: the draft made no guess in this race")
    lines = [
        busy_notice_html(e.reading) + "**E[tokens per pass] = (1 − α^(k+1)) ÷ (1 − α) · speed-up "
        "= E × T_step ÷ (k·T_draft + T_verify)** (theoretical).",
        (f"{kept}. At your k = {f.k}: E = **{r.tokens_per_pass:.2f}** tokens per pass by the "
         f"formula, **{f.tokens_per_pass:.2f}** measured; speed-up {r.speedup:.2f}× by the formula "
         f"({r.tokens_per_pass:.2f} × {f.step_s * 1000:.0f} ms ÷ ({f.k} × {f.draft_s * 1000:.1f} "
         f"ms + {f.verify_s * 1000:.0f} ms)), {times(f.speedup)} measured."),
        expectation_verdict(e)[1],
    ]
    sweep = _mine(sweep_points, f.draft)
    if sweep:
        top = max(sweep, key=lambda p: p.speedup)
        lines.append(f"The k sweep on this prompt measured its best at k = {top.k} "
                     f"({times(top.speedup)}).")
    lines.append("*Assumed: k guesses every pass (prompt lookup sometimes has fewer), each kept "
                 "at rate α independently (real text has easy and hard stretches), the check's "
                 "time linear from a plain step (k = 0) to this race's pass; batch 1, this "
                 "race's times.*")
    return "  \n".join(lines)


def sampled_md(run, greedy_alpha: float | None = None) -> str:
    """The sampled rule's α at a temperature, its E beside the measured tokens per pass."""
    if run is None:
        return EMPTY_SAMPLED
    rule = ("Greedy rule: keep a guess if it is the model's top pick" if run.temperature == 0
            else f"Sampled rule at temperature {run.temperature:g}: keep with probability "
                 "min(1, p ÷ q)")
    if not run.judged:
        return f"{rule}: the draft made no guess in {run.passes} passes, so α cannot be counted."
    out = (f"{rule}: **{run.accepted} of {run.judged}** judged guesses kept, **α = "
           f"{run.alpha:.2f}** (measured, seed {run.seed}, draft {run.draft}). E at k = {run.k}: "
           f"**{run.expected_tokens_per_pass:.2f}** tokens per pass (theoretical); this run made "
           f"**{run.tokens_per_pass:.2f}** (measured, {run.passes} passes).")
    if greedy_alpha is not None:
        out += f" Your greedy race with this draft: α = {greedy_alpha:.2f}."
    return out
