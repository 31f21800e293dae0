"""Lesson 3's text view: the answer so far, each token a tile numbered by its step."""
from __future__ import annotations

import html

from .token_view import TINTS, visible_whitespace


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
        style = f"background:{TINTS[e.index % len(TINTS)]};color:#111"
        cls = "lab-tok special" if e.special or e.chosen_by == "your pick" else "lab-tok"
        title = html.escape(f"step {e.index} · id {e.token_id} · {e.chosen_by}", quote=True)
        spans.append(f"<span class='{cls}' style='{style}' title='{title}'>{html.escape(label)}"
                     f"<sub>{e.index}</sub></span>")
    return f"<div class='lab-tokens' id='decode-tokens'>{''.join(spans)}</div>"


def decode_stats_md(events, finished: str | None) -> str:
    """TTFT, TPOT, tokens/s and cache size from the measured step events."""
    if not events:
        return "*No tokens yet.*"
    ttft = events[0].seconds
    rest = [e.seconds for e in events[1:]]
    parts = [f"**Time to first token:** {ttft * 1000:.0f} ms (prefill of "
             f"{events[0].forward_tokens} tokens + choosing)"]
    if rest:
        tpot = sum(rest) / len(rest)
        parts.append(f"**Time per output token:** {tpot * 1000:.0f} ms (mean of {len(rest)})")
        parts.append(f"**Decode speed:** {1 / tpot:.1f} tokens/s")
    last = events[-1]
    parts.append(f"**KV cache:** {last.cache_tokens} positions, {last.cache_bytes / 1e6:.2f} MB "
                 "(one behind the text: the newest token's keys and values are written by the "
                 "next step, which reads it)")
    parts.append(f"**Tokens:** {len(events)}")
    if finished:
        parts.append(f"**Finished:** {finished}")
    return (" · ".join(parts)
            + "  \n*All measured on this machine, device synced before each clock read.*")


CACHE_FREED = ("ℹ️ *Your KV cache had been freed to keep the room's memory within its budget "
               "(idle too long, or others needed the space). Your tokens were kept: this step "
               "fed them all again in one pass, so its time includes that prefill.*")
