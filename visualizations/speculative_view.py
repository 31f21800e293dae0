"""Lesson 3b's views: each verification pass as chips (guesses kept ✓, the first rejected ✗, the
rest unused, the model's own token ★), and a race's headline cards and sentences.
"""
from __future__ import annotations

import html

from .cards import Card, cards_html, times
from .glossary import NOTES
from .noise_view import busy_notice_html, supports_verdict, withheld
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
        Card("Guesses kept", f"{s.acceptance:.0%}", f"{s.accepted} of {s.proposed}"),
    ])
    tokens = ("Both lanes made **the same tokens**" if s.identical else
              "**The lanes' tokens differ** (rounding tipped a near-tie)")
    return busy_notice_html(noise) + head + (
        f"{verdict_sentence(s, noise)}  \n{ceiling_sentence(s, noise)}  \n{tokens} "
        f"({s.new_tokens} tokens after a {s.prompt_tokens}-token prompt; the first token, from "
        f"the prefill, is not counted in tokens/s). The draft spent {s.draft_seconds:.2f} s of "
        f"the {s.spec_seconds:.2f} s.")

