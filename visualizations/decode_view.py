"""Lesson 3's text view: the answer so far, each token a tile numbered by its step."""
from __future__ import annotations

from .cards import Card, cards_html
from .token_view import TINTS, chip, visible_whitespace


def output_html(events) -> str:
    """events: objects with .index, .piece, .special, .token_id, .chosen_by."""
    if not events:
        return ("<div class='lab-tokens lab-empty'>The answer appears here, one token per step. "
                "Press <b>Step</b> or <b>Play</b>.</div>")
    spans = []
    for e in events:
        label = visible_whitespace(e.piece) if e.piece else "▯"
        if e.special:
            label = "⏹ end of turn"
        spans.append(chip(label, f"step {e.index} · id {e.token_id} · {e.chosen_by}",
                          TINTS[e.index % len(TINTS)], e.special or e.chosen_by == "your pick",
                          f"<sub>{e.index}</sub>", ends_line=e.piece.endswith("\n")))
    return f"<div class='lab-tokens' id='decode-tokens'>{''.join(spans)}</div>"


def timed_step(event) -> bool:
    """Whether a step counts in 'time per output token'. Left out: the first token (prefill),
    a branch pick (it re-reads a token after the cache was cropped) and a step that re-fed the
    text after the cache was freed (a prefill in disguise)."""
    return event.index > 0 and event.chosen_by != "your pick" and event.forward_tokens <= 1


def decode_stats_md(events, finished: str | None) -> str:
    """TTFT, TPOT, tokens/s and the cache's size as cards (the numbers a class reads, each
    with how it was taken), then one line: the token count, any step left out, how it ended."""
    if not events:
        return "*No tokens yet.*"
    ttft = events[0].seconds
    rest = [e.seconds for e in events[1:] if timed_step(e)]
    left_out = len(events) - 1 - len(rest)
    tpot = sum(rest) / len(rest) if rest else None
    last = events[-1]
    cards = cards_html([
        Card("Time to first token", f"{ttft * 1000:,.0f} ms",
             f"prefill of {events[0].forward_tokens} tokens + choosing"),
        Card("Time per output token", f"{tpot * 1000:,.0f} ms" if tpot else "—",
             f"mean of {len(rest)} step{'s' if len(rest) > 1 else ''}" if tpot
             else "from the second token on"),
        Card("Decode speed", f"{1 / tpot:.1f} tokens/s" if tpot else "—", "1 ÷ time per token"),
        Card("KV cache", f"{last.cache_bytes / 1e6:.2f} MB",
             f"{last.cache_tokens} positions, one behind the text")])
    parts = [f"**Tokens:** {len(events)}",
             "the newest token's keys and values are written by the next step, which reads them"]
    if left_out:
        parts.append(f"{left_out} step{'s' if left_out > 1 else ''} left out: your branch pick "
                     "or a cache rebuilt, not ordinary decode steps")
    if finished:
        parts.append(f"**Finished:** {finished}")
    parts.append("*all measured here, device synced before each clock read*")
    return cards + " · ".join(parts)


CACHE_FREED = ("ℹ️ *Your KV cache had been freed to keep the room's memory within its budget "
               "(idle too long, or others needed the space). Your tokens were kept: this step "
               "fed them all again in one pass, so its time includes that prefill.*")
