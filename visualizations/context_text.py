"""Long contexts, in words: prefill and its L² share, decode against the bandwidth floor,
attention's memory, what cuts the cost, the guess's answer; no verdict inside the run's noise.
"""
from __future__ import annotations

from .cards import SAME_WITHIN, human_bytes, ms
from .glossary import NOTES
from .kv_charts import DECODE_BUTTON, MEMORY_BUTTON, PREFILL_BUTTON
from .noise_view import busy_notice_html, supports_verdict, withheld

MARGIN = SAME_WITHIN  # a ratio of single measurements within 10% of 1 gets no verdict


def prefill_markdown(points, curve=None, shares=(), noise=None) -> str:
    if not points:
        return f"*Press **{PREFILL_BUTTON}**: the table and the fit appear here.*"
    by_length = {s.tokens: s for s in shares}
    lines = ["| prompt L (tokens) | prefill (measured) | per prompt token | L² share of the fit "
             "| attention's share of the arithmetic (theoretical) |", "|---|---|---|---|---|"]
    for p in points:
        s = by_length.get(p.tokens)
        lines.append(f"| {p.tokens:,} | {p.seconds:,.2f} s | {ms(p.seconds_per_token)} | "
                     + (f"{s.quadratic_share:.0%} | {s.attention_flops_share:.0%} |" if s
                        else "… | … |"))
    text = [busy_notice_html(noise) + "\n".join(lines), "",
            f"**Measured:** {prefill_trend(points, curve, noise)}. A pass over L tokens does the "
            "matrix products once per token, the same work per token at any length, and "
            "attention, the L² term: each token's query is scored against the key of every token "
            "up to itself (L²/2 pairs per head per layer) and the values mixed by those scores."]
    tail = by_length.get(points[-1].tokens)
    if curve is not None and tail is not None:
        text += ["", fit_reading(curve, tail, points[-1].tokens, noise)]
    return "\n".join(text)


def prefill_trend(points, curve, noise) -> str:
    first, last = points[0], points[-1]
    span = f"from {first.tokens:,} to {last.tokens:,} tokens"
    if not supports_verdict(noise):
        return f"the time per prompt token {span} is in the table ({withheld(noise)})"
    rise = last.seconds_per_token / first.seconds_per_token
    if rise > MARGIN:
        return f"the time per prompt token rose **{rise:.1f}×** {span}"
    if rise < 1 / MARGIN:
        return f"the time per prompt token fell to **{rise:.2f}×** {span}" + (
            " (the fit's fixed part a is shared by more tokens in a longer pass)"
            if curve is not None and curve.a > 0 else "")
    return f"the time per prompt token stayed within 10% {span}"


def fit_reading(curve, tail, tokens: int, noise) -> str:
    if not supports_verdict(noise):
        return (f"**Fit** ({curve.points} points): the L² share is in the table; no reading of it "
                f"here ({withheld(noise)}). Attention is {tail.attention_flops_share:.0%} of the "
                f"arithmetic at {tokens:,} tokens (theoretical).")
    if tail.measurable:
        return (f"**Fit** (least squares, {curve.points} points): a = {curve.a * 1000:,.0f} ms, b "
                f"= {curve.b * 1e6:,.1f} µs per token, c = {curve.c * 1e9:,.2f} ns per token². At "
                f"{tokens:,} tokens the L² term is **{tail.quadratic_share:.0%}** of the fitted "
                f"time; attention is {tail.attention_flops_share:.0%} of the arithmetic "
                "(theoretical: 2 × layers × heads × head dim × L² against 2 × parameters × L). The "
                "two differ where attention's kernels run faster or slower per operation than the "
                "matrix products.")
    return (f"**Fit** ({curve.points} points): this run cannot separate an L² term from its noise "
            f"at {tokens:,} tokens (it is under twice the fit's residual of "
            f"{ms(curve.rms_seconds)}); attention is still {tail.attention_flops_share:.0%} of the "
            "arithmetic there (theoretical).")


def decode_markdown(points, theory=None, window: int = 0, noise=None) -> str:
    if not points:
        return f"*Press **{DECODE_BUTTON}**: the table appears here.*"
    batches = sorted({p.batch for p in points})
    lengths = sorted({p.cache_tokens for p in points})
    at = {(p.batch, p.cache_tokens): p for p in points}
    head = "| cache L |" + "".join(f" batch {b} (measured) |" for b in batches)
    if theory is not None:
        head += "".join(f" batch {b} floor (theoretical) |" for b in batches)
    lines = [head, "|---" * head.count(" |") + "|"]  # a rule under every column
    for n in lengths:
        row = f"| {n:,} |" + "".join(
            f" {ms(at[(b, n)].seconds)} |" if (b, n) in at else " … |" for b in batches)
        if theory is not None:
            row += "".join(f" {ms(theory.seconds(n, b))} |" for b in batches)
        lines.append(row)
    text = [busy_notice_html(noise) + "\n".join(lines)]
    for b in batches:
        mine = sorted((p for p in points if p.batch == b), key=lambda p: p.cache_tokens)
        lo, hi = mine[0], mine[-1]
        if len(mine) < 2:
            continue
        line = f"**Batch {b}, measured:** {decode_verdict(lo, hi, noise)}."
        if theory is not None:
            star = theory.crossover_tokens(b)
            where = (f"beyond the {window:,}-token window" if window and star > window
                     else "within the window")
            line += " " + (f"The floor grows from {ms(theory.seconds(lo.cache_tokens, b))} to "
                           f"{ms(theory.seconds(hi.cache_tokens, b))}: at {hi.cache_tokens:,} "
                           f"tokens the cache is {theory.kv_share(hi.cache_tokens, b):.0%} of the "
                           f"bytes read. Cache reads equal weight reads at **L* = {star:,} "
                           f"tokens** ({where}).")
        text.append(line)
    if theory is not None:
        floor = (f"*Floor, theoretical:* (weights {human_bytes(theory.weight_bytes)} + batch × L × "
                 f"{human_bytes(theory.kv_bytes_per_token)} per token) ÷ this machine's measured "
                 f"{theory.bandwidth_gbs:.1f} GB/s, in {theory.dtype}. A real step also computes, "
                 "launches kernels and copies the cache as it grows (Hugging Face's cache grows by "
                 "concatenation).")
        text.append(f"\n{floor} {_against_floor(points, theory, noise)}")
    return "\n\n".join(text)


def decode_verdict(lo, hi, noise) -> str:
    steps = f"steps at {lo.cache_tokens:,} and {hi.cache_tokens:,} cached tokens"
    if not supports_verdict(noise):
        return f"{steps} are in the table ({withheld(noise)})"
    apart = lo.seconds_min > hi.seconds_max or hi.seconds_min > lo.seconds_max  # no overlap
    if apart and hi.seconds > lo.seconds:
        return (f"a step with {hi.cache_tokens:,} cached tokens took "
                f"**{hi.seconds / lo.seconds:.1f}×** one with {lo.cache_tokens:,}")
    return f"{steps} could not be told apart in this run (their times overlap)"


def _against_floor(points, theory, noise=None) -> str:
    ratios = [p.seconds / theory.seconds(p.cache_tokens, p.batch) for p in points]
    lo, hi = min(ratios), max(ratios)
    said = f"Here the measured steps took {lo:.{1 if lo >= 1 else 2}f}× to {hi:.1f}× their floor"
    if lo >= 1 or not supports_verdict(noise):
        return said + "."
    return (said + ": below 1, the step read faster than the bandwidth measurement did (a cache "
            "held part of it, or its kernels stream better than a plain sum).")


FLASH_ATTENTION = NOTES["flash_attention"]


def memory_markdown(peaks, noise=None) -> str:
    if not peaks:
        return (f"*Press **{MEMORY_BUTTON}**: the same prefill runs both ways.*\n\n"
                + FLASH_ATTENTION)
    lines = ["| attention | prompt tokens | peak memory (measured) | one layer's L × L scores "
             "(theoretical) | prefill time |", "|---|---|---|---|---|"]
    lines += [f"| {p.implementation} | {p.tokens:,} | {human_bytes(p.peak_bytes)} | "
              f"{human_bytes(p.scores_bytes)} | {p.seconds:,.2f} s |" for p in peaks]
    text = (busy_notice_html(noise) + "\n".join(lines)
            + f"\n\n*Measured as the {peaks[0].method}.*")
    by = {p.implementation: p for p in peaks}
    if "eager" in by and "sdpa" in by:
        text += " " + memory_verdict(by["eager"], by["sdpa"], noise)
    return text + "\n\n" + FLASH_ATTENTION


def memory_verdict(eager, sdpa, noise=None) -> str:
    """Eager's peak against sdpa's: other programs do not change this process's peak, so the
    verdict stands when busy, unless a peak was *sampled* (a busy sampler can miss the top)."""
    if noise is not None and noise.busy and (eager.sampled or sdpa.sampled):
        return (f"The peaks are in the table; {withheld(noise)} (a sampled peak can miss its "
                "top while the CPU is busy).")
    extra = eager.peak_bytes - sdpa.peak_bytes
    if eager.peak_bytes > MARGIN * sdpa.peak_bytes and extra > 0.1 * eager.scores_bytes:
        return (f"Eager attention needed **{human_bytes(extra)} more** at its peak "
                f"({eager.peak_bytes / max(sdpa.peak_bytes, 1):.1f}×): the score table and its "
                "softmax, written out whole for one layer at a time. Both peaks include the KV "
                "cache the prefill fills.")
    return ("In this run the two peaks are within 10% of each other: the score table did not stand "
            "out from the rest of the pass.")


def cuts_markdown(cuts) -> str:
    if not cuts:
        return ""
    tokens = cuts[0].tokens
    lines = [f"**What cuts the cost of a {tokens:,}-token context** (KV cache of one "
             "sequence, or of all the requests in the row)", "",
             "| technique | figures | cache before | cache after | fewer bytes | what changes "
             "| what it gives up |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {c.name} | {c.label} | {human_bytes(c.bytes_before)} | "
              f"{human_bytes(c.bytes_after)} | {c.factor:.1f}× | {c.how} | {c.trade_off} |"
              for c in cuts]
    return "\n".join(lines)


def guess_verdict_markdown(comparison, theory=None, noise=None) -> str:
    """The guess's answer from a `LengthComparison`, with the floor's ratio if `theory` is given."""
    if comparison is None:
        return f"*Press **{DECODE_BUTTON}** first: the answer is measured.*"
    s, g = comparison.short, comparison.long
    head = (f"One decode step with **{g.cache_tokens:,}** cached tokens took **{ms(g.seconds)}** "
            f"against **{ms(s.seconds)}** with {s.cache_tokens:,} (batch {g.batch}, measured, "
            "median of its repeats)")
    if not supports_verdict(noise):
        text = head + f" ({withheld(noise)})."
    elif comparison.beyond_noise:
        text = head + f": **{comparison.ratio:.2f}×** as long."
    else:
        text = (head + f": their ranges overlap ({ms(s.seconds_min)}–{ms(s.seconds_max)} "
                f"and {ms(g.seconds_min)}–{ms(g.seconds_max)}), so this run cannot tell them "
                "apart.")
    if theory is not None:
        floor = theory.seconds(g.cache_tokens, g.batch) / theory.seconds(s.cache_tokens, s.batch)
        kv = theory.kv_bytes_per_token
        text += " " + (f"The bandwidth floor predicts **{floor:.2f}×**: the weights are read once "
                       f"either way, the cache adds {human_bytes(g.batch * g.cache_tokens * kv)} "
                       f"against {human_bytes(s.batch * s.cache_tokens * kv)}.")
    return text
