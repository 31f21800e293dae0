"""The measured-timing sentences of 'Try it' and Lesson 2: time to first token, time per output
token, and why one prefill pass beats feeding the prompt one token at a time."""
from __future__ import annotations

from .cards import Card, cards_html, ratio_side, times
from .noise_view import busy_notice_html, reference_html, supports_verdict

WAIT_SHOWN_S = 0.02  # a shorter wait is the server's own wake-up between steps, not a queue


def prompt_work(first, queued_s: float = 0.0) -> str:
    """What a time to first token paid for, from the first event's record: prompt tokens
    computed (in how many passes), those read from the prefix cache, and the wait for a row."""
    computed = first.forward_tokens
    cached = getattr(first, "prefix_cached_tokens", 0)
    passes = getattr(first, "prefill_passes", 1)
    if passes < 1:  # another engine's answer: what it computed is its own
        return f"{computed} prompt tokens"
    how = "in one pass" if passes <= 1 else f"in {passes} passes (chunked prefill: lesson 5)"
    said = (f"{computed} prompt tokens computed {how}" if not cached else
            f"{computed} of {computed + cached} prompt tokens computed {how}, {cached} read "
            "from the prefix cache, which held this prompt's start (lesson 4b)")
    return said + (f", after {queued_s * 1000:,.0f} ms waiting to join the batch"
                   if queued_s >= WAIT_SHOWN_S else "")


def live_stats_md(ttft: float | None, decode_seconds: float, decoded: int,
                  prompt_tokens: int, first=None, queued_s: float = 0.0) -> str:
    if ttft is None:
        return "*Press **Generate**: the answer streams in token by token.*"
    tpot = decode_seconds / decoded if decoded else None
    rate, tpot_s = (f"{1 / tpot:.1f} tokens/s", f"{tpot * 1000:.0f} ms") if tpot else ("—", "—")
    cards = cards_html([Card("Time to first token", f"{ttft * 1000:,.0f} ms", "measured"),
                        Card("Time per output token", tpot_s, "measured, mean"),
                        Card("Decode speed", rate, "measured")])
    work = (prompt_work(first, queued_s) if first is not None else f"{prompt_tokens} prompt tokens")
    return cards + (f"**Measured:** time to first token **{ttft * 1000:.0f} ms** ({work}) · "
            f"time per output token **{tpot_s}** · "
            f"decode speed **{rate}** · {decoded + 1} tokens generated")


def prefill_report_md(m) -> str:
    """Explain one measured prefill `m` (.decode_step_seconds None: no decode step ran)."""
    n, prefill, tpot = m.prompt_tokens, m.prefill_seconds, m.decode_step_seconds
    noise = getattr(m, "noise", None)
    heads = [Card(f"Prefill, {n} tokens", f"{prefill * 1000:,.0f} ms", "measured, one pass"),
             Card("Time to first token", f"{m.ttft_seconds * 1000:,.0f} ms", "measured")]
    lines = [
        f"**Measured on this machine:** your prompt is **{n} tokens** (chat template included).",
        f"- Prefill: all {n} tokens in **one forward pass**: **{prefill * 1000:.0f} ms** "
        f"({n / prefill:,.0f} tokens/s). Time to first token: **{m.ttft_seconds * 1000:.0f} ms**.",
    ]
    if tpot:  # prefill's time per prompt token against a decode step's one token
        card, said = per_token_verdict(m, noise)
        heads.append(card)
        lines += [f"- A decode step, which processes **1 token**, took **{tpot * 1000:.0f} ms** "
                  f"(median of {m.decode_steps}).", *said]
    return busy_notice_html(noise) + cards_html(heads) + "\n".join(lines)


def per_token_verdict(m, noise) -> tuple[Card, list[str]]:
    """Prefill's time per prompt token against a decode step's: a card and sentences."""
    n, prefill, tpot = m.prompt_tokens, m.prefill_seconds, m.decode_step_seconds
    per_tok, ratio = prefill / n, tpot / (prefill / n)
    if not supports_verdict(noise):
        note = "noisy: run again" if noise is not None and noise.busy else "measured"
        return (Card("Per token, a decode step ÷ prefill", times(ratio), note),
                [f"- Prefill spent **{per_tok * 1000:.1f} ms per prompt token**; the decode "
                 f"step **{tpot * 1000:.0f} ms** on its one token (no verdict from this run)."])
    side = ratio_side(ratio)
    card = Card({"faster": "Per token, prefill is cheaper by",
                 "slower": "Per token, prefill costs more by"}.get(
                     side, "Per token, a decode step ÷ prefill"),
                times(max(ratio, 1 / ratio) if side != "same" else ratio),
                "than a decode step, measured" if side != "same" else "about the same, measured")
    said = (f"**{times(ratio)}** less than a decode step spends on its single token: one pass's "
            "fixed cost (reading the weights, starting its operations) was shared by all "
            f"{n} tokens"
            if side == "faster" else
            f"**{times(1 / ratio)}** more than a decode step spends on its single token"
            if side == "slower" else "about what a decode step spends on its single token")
    return card, [
        f"- So prefill spent **{per_tok * 1000:.1f} ms per prompt token**, {said}.",
        "- " + ("Why the first token is slower: it waits for the whole prefill "
                f"({m.ttft_seconds * 1000:.0f} ms ≈ {m.ttft_seconds / tpot:.1f} decode steps "
                "here), longer for longer prompts; each next token costs about one decode step, "
                "which grows slowly with the text (lesson 4c measures it).")]


def sweep_progress_md(done: int, total: int, point) -> str:
    """One line per measured length (`.sequential_measured` False: extrapolated)."""
    return (f"Measured {done}/{total}: {point.tokens} tokens → prefill "
            f"{point.parallel_seconds * 1000:.0f} ms vs one-at-a-time "
            f"{point.sequential_seconds * 1000:.0f} ms"
            + ("" if point.sequential_measured else " (extrapolated)"))


def verdict_point(points):
    """The longest length measured both ways (else the longest) and one pass's speed-up there."""
    measured = [p for p in points if p.sequential_measured]
    last = measured[-1] if measured else points[-1]
    return last, last.sequential_seconds / last.parallel_seconds


def sweep_verdict_md(points, noise=None, reference=None) -> str:
    """A sweep's closing line at `verdict_point` (busy: the quiet `reference`; impossible: why)."""
    if not points:
        return "No prompt lengths were measured."
    last, ratio = verdict_point(points)
    how = "measured both ways" if last.sequential_measured else "one-at-a-time extrapolated"
    impossible = getattr(last, "impossible", None)
    robust = getattr(last, "robust", None)
    if impossible:
        head = Card("One token at a time ÷ one pass", "—", "impossible: not shown")
        said = (f"**not a possible result** at {last.tokens} tokens: {impossible} This machine was "
                "disturbed; measured again: still impossible, so no speed-up is shown.")
    elif supports_verdict(noise) and ratio_side(ratio) == "faster":
        head = Card("One pass is faster by", times(ratio), f"at {last.tokens} tokens")
        said = (f"Done. At {last.tokens} tokens ({how}), one pass is **{times(ratio)}** faster "
                "than feeding the tokens one at a time.")
    else:
        head = Card("One token at a time ÷ one pass", times(ratio),
                    "noisy: run again" if noise is not None and noise.busy else
                    "not faster on this run" if noise is not None else f"at {last.tokens} tokens")
        said = (f"Done. At {last.tokens} tokens ({how}): one pass "
                f"**{last.parallel_seconds * 1000:,.0f} ms**, one token at a time "
                f"**{last.sequential_seconds * 1000:,.0f} ms** (no verdict from this run).")
    if robust is not None and not impossible:
        said += (f" Speed-up {robust.label()}: one pass counts at its faster rounds, each token "
                 "fed one at a time at the median of its neighbours, so a step slowed by another "
                 "program does not count.")
    live = "not a possible result" if impossible else times(ratio)
    return busy_notice_html(noise) + reference_html(
        reference, "One pass's speed-up", live, noise) + cards_html([
        Card(f"One pass, {last.tokens} tokens", f"{last.parallel_seconds * 1000:,.0f} ms",
             "measured"),
        Card("One token at a time", f"{last.sequential_seconds * 1000:,.0f} ms",
             "measured" if last.sequential_measured else "extrapolated"),
        head]) + said
