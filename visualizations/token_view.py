"""Text as coloured token pieces (lesson 1 with ids, lesson 3's answer numbered by step), their
whitespace made visible (· space, ↵ newline, → tab): " world" and "world" are two tokens."""
from __future__ import annotations

import html

from .cards import Card, cards_html, md_table
from .glossary import NOTES

# Light tints of the Okabe–Ito colours: dark text stays readable on each.
TINTS = ["#cfe3f1", "#f7e2b3", "#bfe6d8", "#f3cdb5", "#d5ecf9", "#efd3e3"]


def visible_whitespace(text: str) -> str:
    return text.replace(" ", "·").replace("\n", "↵").replace("\t", "→")


def shown_piece(piece: str) -> str:
    """A token's text as a chip shows it (▯: a byte piece of a character split over tokens)."""
    return visible_whitespace(piece) or "▯"


def chip(label: str, info: str, tint: str, special: bool, sub: str = "",
         ends_line: bool = False) -> str:
    """One token chip: `info` shows on tap (focus) or hover; a chip ending a line breaks it."""
    cls = "lab-tok special" if special else "lab-tok"
    info = html.escape(info, quote=True)
    out = (f"<span class='{cls}' tabindex='0' style='background:{tint};color:#111' "
           f"title='{info}' data-info='{info}'>{html.escape(label)}{sub}</span>")
    return out + ("<span class='lab-break'></span>" if ends_line else "")


def token_html(tokens) -> str:
    if not tokens:
        return "<div class='lab-tokens lab-empty'>Type some text to see its tokens.</div>"
    spans = (chip(visible_whitespace(t.vocab_piece) if t.special else shown_piece(t.text or ""),
                  f"id {t.id} · vocabulary entry {t.vocab_piece!r}", TINTS[i % len(TINTS)],
                  t.special, f"<sub>{t.id}</sub>", ends_line=(t.text or "").endswith("\n"))
             for i, t in enumerate(tokens))
    return f"<div class='lab-tokens'>{''.join(spans)}</div>"


def token_counts_md(text: str, n_tokens: int, n_special: int = 0) -> str:
    """Characters, words, tokens and their ratios (no word count for Chinese or Japanese)."""
    unspaced = any("\u3040" <= c <= "\u30ff" or "\u3400" <= c <= "\u9fff" for c in text)
    words = 0 if unspaced else len(text.split())
    per_word = f"{n_tokens / words:.2f}" if words else "—"
    chars_per_tok = f"{len(text) / n_tokens:.1f}" if n_tokens else "—"
    extra = f" ({n_special} special)" if n_special else ""
    counted = (f"**{words:,}** words · " if words or not text.strip() else
               "words not counted (no spaces between them) · ")
    return (f"**{len(text):,}** characters · {counted}**{n_tokens:,}** tokens{extra} · "
            f"**{per_word}** tokens per word · **{chars_per_tok}** characters per token")


def template_note_md(plain_tokens: int, wrapped_tokens: int, special_tokens: int) -> str:
    return (f"Wrapped in the chat template, your {plain_tokens} tokens become "
            f"**{wrapped_tokens}**: **{wrapped_tokens - plain_tokens}** tokens of role markers and "
            f"the default system message ({special_tokens} special tokens), paid on every turn.")


def token_cost_md(cost, input_price_per_m: float, output_price_per_m: float) -> str:
    """One request's cost (prices in dollars per million tokens)."""
    return (f"**{cost.input_tokens:,} input tokens** × ${input_price_per_m:g}/M = "
            f"${cost.input_cost:.6f} · **{cost.output_tokens:,} output tokens** × "
            f"${output_price_per_m:g}/M = ${cost.output_cost:.6f} · **per request "
            f"${cost.total:.6f}**, per million requests **${cost.total * 1e6:,.0f}** *(arithmetic: "
            "tokens × price per million ÷ 1,000,000)*")


def conversation_cost_md(rows) -> str:
    """The multi-turn table (`TurnCost`s): the input grows every turn, and so does the bill."""
    if not rows:
        return ""
    lines = [md_table("turn | input tokens sent | output tokens | this turn | conversation so far",
                      [[r.turn, f"{r.input_tokens:,}", f"{r.output_tokens:,}", f"${r.cost:.6f}",
                        f"${r.total:.6f}"] for r in rows])]
    first, last = rows[0], rows[-1]
    once = sum(first.cost for _ in rows)  # the same turns, had each been sent alone
    if len(rows) > 1 and first.input_tokens:
        lines.append("\n" + (f"By turn {last.turn} one request sends **{last.input_tokens:,} "
                             f"tokens**, {last.input_tokens / first.input_tokens:.0f}× the first: "
                             "the model keeps nothing between requests, so every earlier question "
                             f"and answer is sent, prefilled and paid for again. The {last.turn} "
                             f"turns cost **${last.total:.6f}**, {last.total / once:.1f}× what "
                             f"{last.turn} separate first turns would *(arithmetic, the same "
                             "prices; a provider's prompt cache may discount the resent part)*."))
    return "\n".join(lines)


def output_html(events) -> str:
    if not events:
        return ("<div class='lab-tokens lab-empty'>The answer appears here, one token per step. "
                "Press <b>Step</b> or <b>Play</b>.</div>")
    spans = (chip("⏹ end of turn" if e.special else shown_piece(e.piece),
                  f"step {e.index} · id {e.token_id} · {e.chosen_by}", TINTS[e.index % len(TINTS)],
                  e.special or e.chosen_by == "your pick", f"<sub>{e.index}</sub>",
                  ends_line=e.piece.endswith("\n"))
             for e in events)
    return f"<div class='lab-tokens' id='decode-tokens'>{''.join(spans)}</div>"


def timed_step(event) -> bool:
    """Whether a step counts in 'time per output token': not the first (prefill), a branch pick
    (it re-reads a token after a crop) nor a refill after a freed cache (a prefill in disguise)."""
    return event.index > 0 and event.chosen_by != "your pick" and event.forward_tokens <= 1


def decode_stats_md(events, finished: str | None) -> str:
    """TTFT, TPOT, tokens/s and the cache's size as cards, then the count and how it ended."""
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


CACHE_FREED = NOTES["cache_freed"]
