"""Lesson 3's text view: the answer so far, each token a tile numbered by its step."""
from __future__ import annotations

from .cards import Card, cards_html
from .token_view import TINTS, chip, visible_whitespace


def output_html(events, branched_at: int | None = None) -> str:
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
    """Whether a step counts in 'time per output token': an ordinary decode step. Left out:
    the first token (prefill), a step the learner forced by branching ("your pick": it re-reads
    a token after the cache was cropped) and a step that re-fed the text after the cache was
    freed (a prefill in disguise)."""
    return event.index > 0 and event.chosen_by != "your pick" and event.forward_tokens <= 1


def decode_stats_md(events, finished: str | None) -> str:
    """TTFT, TPOT and tokens/s as cards (the numbers a class reads), then the line with how
    each was taken, the cache size and the token count, from the measured step events."""
    if not events:
        return "*No tokens yet.*"
    ttft = events[0].seconds
    rest = [e.seconds for e in events[1:] if timed_step(e)]
    left_out = len(events) - 1 - len(rest)
    mean = sum(rest) / len(rest) if rest else None
    cards = cards_html([
        Card("Time to first token", f"{ttft * 1000:,.0f} ms", "measured, prefill + choosing"),
        Card("Time per output token", f"{mean * 1000:,.0f} ms" if mean else "—",
             f"measured, mean of {len(rest)}" if mean else "after the second token"),
        Card("Decode speed", f"{1 / mean:.1f} tokens/s" if mean else "—", "measured")])
    parts = [f"**Time to first token:** {ttft * 1000:.0f} ms (prefill of "
             f"{events[0].forward_tokens} tokens + choosing)"]
    if rest:
        tpot = sum(rest) / len(rest)
        why = (f"; {left_out} step{'s' if left_out > 1 else ''} left out: your branch pick or a "
               "cache rebuilt, not ordinary decode steps" if left_out else "")
        parts.append(f"**Time per output token:** {tpot * 1000:.0f} ms (mean of "
                     f"{len(rest)}{why})")
        parts.append(f"**Decode speed:** {1 / tpot:.1f} tokens/s")
    last = events[-1]
    parts.append(f"**KV cache:** {last.cache_tokens} positions, {last.cache_bytes / 1e6:.2f} MB "
                 "(one behind the text: the newest token's keys and values are written by the "
                 "next step, which reads it)")
    parts.append(f"**Tokens:** {len(events)}")
    if finished:
        parts.append(f"**Finished:** {finished}")
    return (cards + " · ".join(parts)
            + "  \n*All measured on this machine, device synced before each clock read.*")


CACHE_FREED = ("ℹ️ *Your KV cache had been freed to keep the room's memory within its budget "
               "(idle too long, or others needed the space). Your tokens were kept: this step "
               "fed them all again in one pass, so its time includes that prefill.*")
