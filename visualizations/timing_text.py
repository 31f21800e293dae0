"""The measured-timing sentences of 'Try it' and Lesson 2: time to first token, time per output
token, and why one prefill pass beats feeding the prompt one token at a time.

Pure functions: measured records in (read by attribute), markdown out. They compute only
ratios of the numbers they are given; nothing here times or runs a model.
"""
from __future__ import annotations

from .cards import Card, cards_html, times


def live_stats_md(ttft: float | None, decode_seconds: float, decoded: int,
                  prompt_tokens: int) -> str:
    """TTFT, time per output token and tokens/s of a streaming answer, all measured.

    >>> live_stats_md(0.25, 0.5, 5, 30).split(" · ")[1]
    'time per output token **100 ms**'
    """
    if ttft is None:
        return "*Press **Generate**: the answer streams in token by token.*"
    tpot = decode_seconds / decoded if decoded else None
    rate = f"{1 / tpot:.1f} tokens/s" if tpot else "—"
    tpot_s = f"{tpot * 1000:.0f} ms" if tpot else "—"
    cards = cards_html([Card("Time to first token", f"{ttft * 1000:,.0f} ms", "measured"),
                        Card("Time per output token", tpot_s, "measured, mean"),
                        Card("Decode speed", rate, "measured")])
    return cards + (f"**Measured:** time to first token **{ttft * 1000:.0f} ms** (prefill of "
            f"{prompt_tokens} prompt tokens) · time per output token **{tpot_s}** · "
            f"decode speed **{rate}** · {decoded + 1} tokens generated")


def prefill_report_md(m) -> str:
    """Explain one measured prefill. `m` has .prompt_tokens, .prefill_seconds, .ttft_seconds,
    .decode_step_seconds (median, or None when no decode step ran) and .decode_steps."""
    n, prefill = m.prompt_tokens, m.prefill_seconds
    tpot = m.decode_step_seconds
    heads = [Card(f"Prefill, {n} tokens", f"{prefill * 1000:,.0f} ms", "measured, one pass"),
             Card("Time to first token", f"{m.ttft_seconds * 1000:,.0f} ms", "measured")]
    if tpot:  # prefill's time per prompt token against a decode step's one token
        ratio = tpot / (prefill / n)
        heads.append(Card("Per token, prefill is cheaper by" if ratio >= 1 else
                          "Per token, prefill costs more by", times(max(ratio, 1 / ratio)),
                          "than a decode step, measured"))
    lines = [cards_html(heads).rstrip("\n"), ""] + [
        f"**Measured on this machine:** your prompt is **{n} tokens** (chat template included).",
        f"- Prefill: all {n} tokens in **one forward pass**: **{prefill * 1000:.0f} ms** "
        f"({n / prefill:,.0f} tokens/s). Time to first token: **{m.ttft_seconds * 1000:.0f} ms**.",
    ]
    if tpot:
        per_tok = prefill / n
        lines += [
            f"- A decode step, which processes **1 token**, took **{tpot * 1000:.0f} ms** "
            f"(median of {m.decode_steps}).",
            f"- So prefill spent **{per_tok * 1000:.1f} ms per prompt token**, "
            f"**{tpot / per_tok:.0f}×** less than a decode step spends on its single token: "
            f"the weights were read once for all {n} tokens instead of once per token.",
            f"- Why the first token is slower: it waits for the whole prefill "
            f"({m.ttft_seconds * 1000:.0f} ms ≈ {m.ttft_seconds / tpot:.1f} decode steps here). "
            "Longer prompts push it further; the next tokens each cost about one decode step, "
            "whatever the prompt length.",
        ]
    return "\n".join(lines)


def sweep_progress_md(done: int, total: int, point) -> str:
    """One line per measured length. `point` has .tokens, .parallel_seconds,
    .sequential_seconds and .sequential_measured (False: extrapolated)."""
    return (f"Measured {done}/{total}: {point.tokens} tokens → prefill "
            f"{point.parallel_seconds * 1000:.0f} ms vs one-at-a-time "
            f"{point.sequential_seconds * 1000:.0f} ms"
            + ("" if point.sequential_measured else " (extrapolated)"))


def verdict_point(points):
    """The point a sweep's verdict quotes: the longest length measured both ways (the longest
    of all, extrapolated, only when none was), and its speed-up of one pass over one-at-a-time."""
    measured = [p for p in points if p.sequential_measured]
    last = measured[-1] if measured else points[-1]
    return last, last.sequential_seconds / last.parallel_seconds


def sweep_verdict_md(points) -> str:
    """The closing line of a sweep: the speed-up at the longest length measured both ways
    (an extrapolated ratio is only quoted when nothing was measured both ways, and says so)."""
    if not points:
        return "No prompt lengths were measured."
    last, ratio = verdict_point(points)
    how = "measured both ways" if last.sequential_measured else "one-at-a-time extrapolated"
    seq_note = "measured" if last.sequential_measured else "extrapolated"
    return cards_html([
        Card(f"One pass, {last.tokens} tokens", f"{last.parallel_seconds * 1000:,.0f} ms",
             "measured"),
        Card("One token at a time", f"{last.sequential_seconds * 1000:,.0f} ms", seq_note),
        Card("One pass is faster by", times(ratio), f"at {last.tokens} tokens"),
    ]) + (f"Done. At {last.tokens} tokens ({how}), one pass is **{times(ratio)}** faster than "
            "feeding the tokens one at a time.")
