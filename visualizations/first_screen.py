"""The first screen's big numbers: "first token: N ms" and "each next token: N ms" while the
model answers, then the cache's measured speed-up when "Now without the cache" has raced.
Pure: measured seconds in, card HTML out. Before a number exists its card says what will
appear there and what fills it.
"""
from __future__ import annotations

from .cards import WAITING, Card, cards_html, ratio_side, times
from .noise_view import busy_notice_html, quiet_note, supports_verdict
from .timing_text import prompt_work


def live_cards_html(ttft_s: float | None, per_token_s: float | None, prompt_tokens: int,
                    decoded: int, batch_rows: int = 1, first_event=None,
                    queued_s: float = 0.0, busy: bool = False) -> str:
    """The two live cards (`busy`: each says its figure is noisy; the notice goes below them).
    `ttft_s`: from sending the prompt to its first token (any wait for a row, then the
    prefill); `per_token_s`: mean wall time between later tokens."""
    work = (prompt_work(first_event, queued_s) if first_event is not None
            else f"{prompt_tokens} prompt tokens")
    noisy = " · noisy, busy machine" if busy else ""
    first = Card(f"first token{noisy}", WAITING if ttft_s is None else f"{ttft_s * 1000:,.0f} ms",
                 "appears when the prompt's prefill ends" if ttft_s is None else
                 f"measured: {work}")
    shared = f", shared with {batch_rows - 1} other request(s)" if batch_rows > 1 else ""
    nxt = Card(f"each next token{noisy}",
               WAITING if per_token_s is None else f"{per_token_s * 1000:,.0f} ms",
               "appears after the second token" if per_token_s is None else
               f"measured: mean of {decoded} one-token steps{shared}")
    return cards_html([first, nxt])


def race_ratio_html(summary, noise=None) -> str:
    """The race's ending: the measured ratio big, both totals under it, and either the busy
    notice or the one sentence the numbers support. `summary`: a `RaceSummary`, by attribute."""
    if summary is None or not summary.new_tokens:
        return ("*Press **Now without the cache**: the same answer made twice, once reading "
                "the stored keys and values, once recomputing the whole text at every step. "
                "The measured ratio appears here.*")
    busy = noise is not None and noise.busy
    note = ("noisy: run again" if busy else "so far" if noise is None else
            "measured, same tokens" if summary.same_tokens else "measured, tokens differ")
    impossible = summary.impossible if noise is not None else None
    cards = cards_html([
        Card("time without ÷ with the cache", "—", "impossible: not shown") if impossible else
        Card("time without ÷ with the cache", times(summary.speedup), note)]) + (
        f"With the cache **{summary.cached_seconds:.2f} s** "
        f"({summary.cached_forward_tokens:,} tokens through the model); recomputing everything "
        f"**{summary.recompute_seconds:.2f} s** ({summary.recompute_forward_tokens:,} tokens).  \n")
    if impossible:  # past physics: the reason stands where the figure would
        return cards + busy_notice_html(noise) + (
            f"**Not a possible result**: {impossible} This machine was disturbed while racing: "
            "press the button again.")
    if supports_verdict(noise):
        why = (f"Over {summary.new_tokens} tokens the cache saved "
               f"{1 - 1 / summary.speedup:.0%} of the time: each step fed one token instead of "
               "the whole text again." if ratio_side(summary.speedup) == "faster" else
               "Over so few tokens the saving was no bigger than the steps' own variation.")
        quiet = quiet_note(noise)
        return cards + why + (f"  \n*{quiet}.*" if quiet else "")
    if busy:  # the ratio stays first, right under its button; the notice follows it
        return cards + busy_notice_html(noise)
    return cards + f"*Racing: {summary.new_tokens} steps done in both lanes…*"
