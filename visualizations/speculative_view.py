"""The speculative-decoding lesson's text views: each verification pass as a row of chips, the
headline cards of a race, and the sentences under them.

A pass row: the draft's k guesses as chips, kept ones green (✓), the first rejected one red (✗,
struck through) and the ones after it grey (never used: they followed a wrong guess), then the
model's own token (blue, ★) that the same pass produced, then tokens gained and the pass time.
"""
from __future__ import annotations

import html

from .cards import Card, cards_html, times
from .noise_view import busy_notice_html, supports_verdict, withheld
from .token_view import chip, visible_whitespace

KEPT, REJECTED, UNUSED, MODEL = "#bfe6d8", "#f3cdb5", "#e6e6e6", "#cfe3f1"
EMPTY_PASSES = ("<div class='lab-tokens lab-empty'>Each verification pass appears here: the "
                "draft's guesses, which the model kept, and its own token. Press <b>Race</b>."
                "</div>")
EMPTY_RACE = ("*Press **Race**: the same prompt decoded speculatively and plainly, "
              "same tokens, taking turns.*")


def _label(piece: str) -> str:
    return visible_whitespace(piece) if piece else "▯"


def pass_row_html(p) -> str:
    """One pass: its label, its chips, tokens gained and its measured time."""
    chips = []
    for i, piece in enumerate(p.proposed_pieces):
        mark, said, tint = (
            ("✓", "kept", KEPT) if i < p.accepted else
            ("✗", "rejected, replaced by the model's token", REJECTED) if i == p.accepted else
            ("", "not used (after a rejection)", UNUSED))
        chips.append(chip(mark + _label(piece), f"guess {i + 1}: {said}", tint, i == p.accepted))
    if p.model_token is not None:
        chips.append(chip("★" + _label(p.model_piece), "the model's own token from this pass",
                          MODEL, False))
    if p.index == 0:
        what = "prefill (the prompt in one pass; no guesses)"
    elif not p.proposed_pieces:
        what = "no guess: a plain decode step"
    else:
        what = f"{len(p.proposed_pieces)} guesses, {p.accepted} kept"
    end = f" · {html.escape(p.finished)}" if p.finished else ""
    return (f"<div class='lab-spec-pass'><b>Pass {p.index}</b> · {what} "
            f"<div class='lab-tokens'>{''.join(chips)}</div>"
            f"<span>+{p.gained} token{'s' if p.gained != 1 else ''} · "
            f"{p.seconds * 1000:.0f} ms (draft {p.draft_seconds * 1000:.0f} ms, model pass "
            f"{p.verify_seconds * 1000:.0f} ms, measured){end}</span></div>")


def passes_html(passes, last: int = 12) -> str:
    """The newest `last` passes, newest at the bottom (the stream animates by appending)."""
    if not passes:
        return EMPTY_PASSES
    hidden = len(passes) - last
    more = f"<div><i>{hidden} earlier passes not shown</i></div>" if hidden > 0 else ""
    return "<div id='spec-passes'>" + more + "".join(pass_row_html(p) for p in passes[-last:]) \
        + "</div>"


def ceiling_sentence(s, noise=None) -> str:
    """Where the run sits against the batch-1 one-token ceiling, from its figures."""
    ceiling, rate = s.ceiling_tokens_per_s, s.tokens_per_s
    per_read = f"**{s.tokens_per_pass:.2f} tokens per read of the weights**"
    if not supports_verdict(noise):
        where = (f"this run {rate:.1f} tokens/s, the one-token ceiling {ceiling:.1f} tokens/s "
                 f"(theoretical: bandwidth ÷ bytes per token; {withheld(noise)})")
    elif rate > ceiling:
        where = (f"**above** the one-token ceiling of {ceiling:.1f} tokens/s (theoretical: "
                 "bandwidth ÷ bytes per token), which binds only decoding that makes one token "
                 "per pass")
    else:
        where = (f"below the one-token ceiling of {ceiling:.1f} tokens/s (theoretical: "
                 f"bandwidth ÷ bytes per token; this run reached {rate / ceiling:.0%} of it); "
                 f"at this many tokens per pass, with the draft's own weight reads, it would be "
                 f"{s.pass_ceiling_tokens_per_s:.1f}")
    return f"{per_read}: {where}."


def verdict_sentence(s, noise=None) -> str:
    """Faster, slower or within noise: `s.verdict`, on a quiet run; else the two speeds."""
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
    """Headline cards and the sentences under them, for one finished race."""
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
                   f"({s.new_tokens} tokens after a {s.prompt_tokens}-token prompt; the first "
                   "token, from the prefill, is not counted in tokens/s). The draft spent "
                   f"{s.draft_seconds:.2f} s of the {s.spec_seconds:.2f} s.")


SAMPLING_RULE = (
    "**With sampling**, a guess is kept with probability min(1, p ÷ q) (p: the model's "
    "probability of that token, q: the draft's); at the first rejection the token is drawn from "
    "what is left, normalised max(0, p − q). Every token then follows the model's own "
    "distribution exactly. Prompt lookup is certain of its guess (q = 1), so it is kept with "
    "probability p.")


THREE_WAYS = (
    "One decode stream that makes **one token per pass** cannot beat the ceiling of lesson 3: "
    "bandwidth ÷ bytes read per token. There are three ways past it: make several tokens per "
    "read of the weights for one stream (**speculative decoding**: guess, then check all the "
    "guesses in one pass), make one token for each of many streams per read (**batching**, "
    "lesson 5), or read fewer bytes per token (**quantization**, lesson 6).")
