"""Lesson 4 in words (the cache, its race, projections, prefix reuse) and 4c's long contexts
(prefill's L² share, decode against the bandwidth floor, attention's memory); no verdict inside
the run's noise."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from .cards import SAME_WITHIN, Card, cards_html, human_bytes, md_table, ms, ratio_side, times
from .glossary import NOTES
from .kv_charts import DECODE_BUTTON, MEMORY_BUTTON, PREFILL_BUTTON
from .noise_view import busy_notice_html, quiet_note, reference_html, supports_verdict, withheld


def formula_markdown(snap) -> str:
    if not snap.tokens:
        return "*The formula fills in once the cache holds its first tokens.*"
    match = "✓ equal" if snap.formula_bytes == snap.tensor_bytes else "✗ different"
    return (f"**bytes = 2 (K and V) × {snap.layers} layers × {snap.kv_heads} KV heads × "
            f"{snap.head_dim} dims × {snap.bytes_per_value} bytes ({snap.dtype}) × "
            f"{snap.tokens:,} tokens × {snap.batch} sequence{'s' if snap.batch > 1 else ''} "
            f"= {snap.formula_bytes:,} bytes**  \n"
            f"The real tensors hold **{snap.tensor_bytes:,} bytes** "
            f"({human_bytes(snap.tensor_bytes)}) · {match} · "
            f"**{snap.bytes_per_token:,} bytes per token** ({human_bytes(snap.bytes_per_token)})")


def growth_step_markdown(step) -> str:
    snap = step.cache
    what = "prefill of the prompt" if step.index == 0 else "one decode step"
    generated = snap.tokens - step.prompt_tokens
    return (f"**Step {step.index}** ({what}, {step.seconds * 1000:.0f} ms): cache holds "
            f"**{snap.tokens} tokens** ({step.prompt_tokens} prompt + {generated} generated) · "
            f"{human_bytes(snap.tensor_bytes)}  \n*Output so far:* {step.text!r}")


LAG_NOTE = NOTES["cache_lag"]  # shown under the cache grid it explains


def race_progress_markdown(index: int, new_tokens: int, both: bool = True) -> str:
    """Step `index` of the race: `both` lanes ran it, or the cached lane only (so far)."""
    done = "both lanes ran it" if both else "cached lane done, now recomputing everything…"
    return f"Step {index + 1} of {new_tokens} · {done}"


def race_summary_markdown(summary, noise=None, reference=None) -> str:
    """The race's `RaceSummary`, its verdict only on a quiet `noise` (busy: the `reference`)."""
    if not summary.new_tokens:
        return "*Press **Race**: the same prompt runs with and without the cache.*"
    same = ("the same greedy tokens in both lanes" if summary.same_tokens
            else "**different tokens** (float rounding tipped a near-tie)")
    busy = noise is not None and noise.busy
    impossible = summary.impossible if noise is not None else None
    live = "not a possible result" if impossible else times(summary.speedup)
    head = busy_notice_html(noise) + reference_html(
        reference, "The cache's speed-up", live, noise) + cards_html([
        Card("With the KV cache", f"{summary.cached_seconds:.2f} s",
             f"measured, {summary.new_tokens} tokens"),
        Card("Recomputing everything", f"{summary.recompute_seconds:.2f} s", "measured"),
        Card("The cache's speed-up", "—", "impossible: not shown") if impossible else
        Card("The cache's speed-up", times(summary.speedup),
             "noisy: run again" if busy else "so far" if noise is None
             else "same tokens" if summary.same_tokens else "tokens differ (near-tie)")])
    again = ("measured again: still impossible, so no speed-up is shown"
             if impossible and summary.attempt else "measuring once more…")
    verdict = (f"**not a possible result**: {impossible} This machine was disturbed; {again}"
               if impossible else
               _verdict(summary.speedup) if supports_verdict(noise) else
               "no verdict from a busy machine" if busy else
               "the verdict comes after the last step")
    if summary.robust is not None and not impossible:
        verdict += (f" (speed-up {summary.robust.label()}: each step's time is the median of its "
                    "neighbours, so a lone step slowed by another program does not count)")
    quiet = quiet_note(noise)
    return head + ((f"**Measured over {summary.new_tokens} new tokens** after a "
                    f"{summary.prompt_tokens}-token prompt: with cache "
                    f"**{summary.cached_seconds:.2f} s**, recomputing "
                    f"**{summary.recompute_seconds:.2f} s**: {verdict}.") + "  \n"
            f"Work: {summary.cached_forward_tokens:,} vs {summary.recompute_forward_tokens:,} "
            f"tokens through the model ({summary.work_ratio:.1f}× more without the cache) · "
            f"{same} · largest score difference {summary.max_logit_gap:.1e}"
            + (f"  \n*{quiet}*" if quiet else ""))


def _verdict(speedup: float) -> str:
    side = ratio_side(speedup)  # the one margin every ratio verdict uses
    if side == "faster":
        return f"the cache made it **{speedup:.1f}× faster**"
    if side == "same":
        return (f"both lanes took about the same time ({speedup:.2f}×, within 10%): with very "
                "few tokens, the saving is no bigger than the step-to-step variation")
    return (f"the cache lane was **slower** this time ({speedup:.2f}×): with very few tokens, "
            "the saving is smaller than the step-to-step variation")


def race_lengths_markdown(points, projection: tuple[int, int, float, float] | None = None,
                          noise=None) -> str:
    """The length race as a table and what it shows. `projection` (theoretical): (prompt, new
    tokens, seconds with the cache, seconds without)."""
    if not points:
        return ""
    rows = [[f"{p.tokens:,}", f"{p.cached_seconds * 1000:,.0f}",
             f"{p.recompute_seconds * 1000:,.0f}", f"{p.ratio:.1f}×"] for p in points]
    short, long = points[0], points[-1]
    text = (busy_notice_html(noise) + md_table("context length L | with cache: one step (ms) | no "
                                               "cache: L + 1 tokens (ms) | no cache ÷ cache", rows)
            + "\n\n" + length_gap_markdown(short, long, noise) + "\n\n"
            + growth_with_length_markdown(long))
    if projection is not None:
        prompt, n, cached, plain = projection
        text += (f"\n\n**Theoretical, from these points:** {n:,} tokens after a {prompt}-token "
                 f"prompt would take about **{cached:,.0f} s** with the cache and "
                 f"**{plain:,.0f} s** without it ({plain / cached:.0f}×).")
    return text


def length_gap_markdown(short, long, noise=None) -> str:
    if not supports_verdict(noise):
        return (f"At {short.tokens} tokens, running all {short.tokens + 1} tokens again took "
                f"**{short.ratio:.1f}×** one cached step; at {long.tokens:,} tokens, "
                f"**{long.ratio:.1f}×** ({withheld(noise)}).")
    gap = "grows to" if long.ratio > 1.1 * short.ratio else "is"  # 10%: beyond noise
    return (f"At {short.tokens} tokens, running all {short.tokens + 1} tokens again costs only "
            f"**{short.ratio:.1f}×** one cached step: one parallel pass that, like a decode step, "
            "reads every weight once (lesson 2's prefill), so a short race undersells the cache. "
            f"At {long.tokens:,} tokens the gap {gap} **{long.ratio:.1f}×**: that pass does the "
            f"matrix products for {long.tokens + 1:,} tokens, and attention scores each against "
            "all before it.")


def growth_with_length_markdown(point) -> str:
    kv, weights = point.kv_bytes_per_token, point.weight_bytes
    return ('**What grows with L.** *With the cache*, each step reads the same '
            f'{human_bytes(weights)} of weights and does the same matrix products at any L; what '
            f'grows is the cache it reads, {human_bytes(kv)} per position '
            f'({human_bytes(point.tokens * kv)} at {point.tokens:,} tokens, '
            f'{point.tokens * kv / (weights + point.tokens * kv):.0%} of the bytes read), and '
            'attention, one score per head per cached position. So the cached step grows with L '
            'too, a fixed amount per token on top of the weight reads (a line, not a proportion), '
            'slowly while the cache is small against the weights; the two are equal at about '
            f'{weights / kv if kv else float("inf"):,.0f} tokens. *Without the cache*, the matrix '
            'products grow in proportion to L and attention with L²: n tokens redo about n²/2 '
            'tokens of work, against n with the cache.')  # the cache's share of a read


def projection_table_markdown(specs: Sequence, crossover: Mapping[str, int], mine,
                              bytes_per_value: int, batch: int, context_window: int) -> str:
    """One row per `ModelSpec`: attention layout, cache per token, weights, and the context
    (`crossover[name]` tokens per sequence, for `batch` sequences) where cache = weights."""
    bpv = bytes_per_value
    table = md_table(
        "model | attention | KV heads / query heads | cache per token | weights | context window "
        "| cache = weights at",
        [[s.name, s.attention, f"{s.kv_heads} / {s.query_heads}",
          human_bytes(s.bytes_per_token(bpv)), human_bytes(s.weight_bytes(bpv)), s.window_label,
          f"{crossover[s.name]:,} tokens × {batch} sequence(s)"
          + ("" if s.supports(crossover[s.name]) else " (beyond its context window)")]
         for s in specs])
    ratio = mine.query_heads // mine.kv_heads
    slide_note = "".join(
        f" {s.name} attends over a {s.sliding_window:,}-token sliding window, so a rolling-buffer "
        f"cache never needs more than {s.sliding_window:,} positions per sequence; the chart "
        "counts every position, as a plain cache would." for s in specs if s.sliding_window)
    return (table + f"\n\n*Theoretical, {bpv} bytes per value for weights and cache.* "
            f"{mine.name} shares each KV head among {ratio} query heads, so its cache is {ratio}× "
            f"smaller than with full multi-head attention; its context window is "
            f"{context_window:,} tokens. Past a model's own window its line turns dotted, "
            "*beyond its context window*: the formula still counts the bytes, but the model was "
            f"not trained to read that far.{slide_note} Mistral-7B and Llama-3-8B have the same "
            "cache shape, so their lines coincide.")


def prefix_markdown(prefix_tokens: int, prefix_seconds: float, prefix_bytes: int,
                    runs: Sequence) -> str:
    head = (f"Shared prefix: **{prefix_tokens} tokens**, prefilled once in "
            f"**{prefix_seconds * 1000:.0f} ms** ({human_bytes(prefix_bytes)} of cache, "
            f"kept for every question).")
    if not runs:
        return head
    rows = [[r.question, r.prompt_tokens, r.reused_tokens, f"{r.ttft_full * 1000:.0f} ms",
             f"{r.ttft_reuse * 1000:.0f} ms", f"{r.speedup:.1f}×",
             "✓ same" if r.same else "✗ differ", repr(r.text)] for r in runs]
    return head + "\n\n" + md_table("question | prompt tokens | reused | TTFT full | TTFT reused "
                                     "| speed-up | tokens | answer", rows)


def prefill_markdown(points, curve=None, shares=(), noise=None) -> str:
    if not points:
        return f"*Press **{PREFILL_BUTTON}**: the table and the fit appear here.*"
    by_length = {s.tokens: s for s in shares}
    shares_at = [by_length.get(p.tokens) for p in points]
    table = md_table("prompt L (tokens) | prefill (measured) | per prompt token | L² share of the "
                     "fit | attention's share of the arithmetic (theoretical)",
                     [[f"{p.tokens:,}", f"{p.seconds:,.2f} s", ms(p.seconds_per_token)]
                      + ([f"{s.quadratic_share:.0%}", f"{s.attention_flops_share:.0%}"] if s
                         else ["…", "…"]) for p, s in zip(points, shares_at)])
    text = [busy_notice_html(noise) + table, "",
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
    if rise > SAME_WITHIN:  # a ratio within 10% of 1 gets no verdict
        return f"the time per prompt token rose **{rise:.1f}×** {span}"
    if rise < 1 / SAME_WITHIN:
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
    floors = theory is not None
    head = " | ".join(["cache L"] + [f"batch {b} (measured)" for b in batches]
                      + [f"batch {b} floor (theoretical)" for b in batches if floors])
    rows = [[f"{n:,}"] + [ms(at[(b, n)].seconds) if (b, n) in at else "…" for b in batches]
            + [ms(theory.seconds(n, b)) for b in batches if floors] for n in lengths]
    text = [busy_notice_html(noise) + md_table(head, rows)]
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
            line += (f" The floor grows from {ms(theory.seconds(lo.cache_tokens, b))} to "
                     f"{ms(theory.seconds(hi.cache_tokens, b))}: at {hi.cache_tokens:,} tokens the "
                     f"cache is {theory.kv_share(hi.cache_tokens, b):.0%} of the bytes read. Cache "
                     f"reads equal weight reads at **L* = {star:,} tokens** ({where}).")
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
    text = (busy_notice_html(noise)
            + md_table("attention | prompt tokens | peak memory (measured) | one layer's L × L "
                       "scores (theoretical) | prefill time",
                       [[p.implementation, f"{p.tokens:,}", human_bytes(p.peak_bytes),
                         human_bytes(p.scores_bytes), f"{p.seconds:,.2f} s"] for p in peaks])
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
    if eager.peak_bytes > SAME_WITHIN * sdpa.peak_bytes and extra > 0.1 * eager.scores_bytes:
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
    return (f"**What cuts the cost of a {tokens:,}-token context** (KV cache of one sequence, or "
            "of all the requests in the row)\n\n"
            + md_table("technique | figures | cache before | cache after | fewer bytes | what "
                       "changes | what it gives up",
                       [[c.name, c.label, human_bytes(c.bytes_before), human_bytes(c.bytes_after),
                         f"{c.factor:.1f}×", c.how, c.trade_off] for c in cuts]))


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
        text = (head + f": their ranges overlap ({ms(s.seconds_min)}–{ms(s.seconds_max)} and "
                f"{ms(g.seconds_min)}–{ms(g.seconds_max)}), so this run cannot tell them apart.")
    if theory is not None:
        floor = theory.seconds(g.cache_tokens, g.batch) / theory.seconds(s.cache_tokens, s.batch)
        kv = theory.kv_bytes_per_token
        text += (f" The bandwidth floor predicts **{floor:.2f}×**: the weights are read once "
                 f"either way, the cache adds {human_bytes(g.batch * g.cache_tokens * kv)} "
                 f"against {human_bytes(s.batch * s.cache_tokens * kv)}.")
    return text
