"""Lesson 4 text: the cache formula filled in, each growth step, the race and its verdict, the
projection table and the prefix-reuse table."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from .cards import Card, cards_html, human_bytes, ratio_side, times
from .glossary import NOTES
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


def race_progress_markdown(index: int, new_tokens: int) -> str:
    return f"Step {index + 1} of {new_tokens} · both lanes ran it"


def race_cached_progress_markdown(index: int, new_tokens: int) -> str:
    return f"Step {index + 1} of {new_tokens} · cached lane done, now recomputing everything…"


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
             else "same tokens" if summary.same_tokens else "tokens differ (near-tie)"),
    ])
    again = ("measured again: still impossible, so no speed-up is shown"
             if impossible and summary.attempt else "measuring once more…")
    verdict = (f"**not a possible result**: {impossible} This machine was disturbed; {again}"
               if impossible else
               _verdict(summary.speedup) if supports_verdict(noise) else
               "no verdict from a busy machine" if busy else
               "the verdict comes after the last step")
    if summary.robust is not None and not impossible:
        verdict += " " + (f"(speed-up {summary.robust.label()}: each step's time is the median of "
                          "its neighbours, so a lone step slowed by another program does not "
                          "count)")
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
    rows = "\n".join(f"| {p.tokens:,} | {p.cached_seconds * 1000:,.0f} | "
                     f"{p.recompute_seconds * 1000:,.0f} | {p.ratio:.1f}× |" for p in points)
    short, long = points[0], points[-1]
    text = (
        busy_notice_html(noise)
        + "| context length L | with cache: one step (ms) | no cache: L + 1 tokens (ms) "
        "| no cache ÷ cache |\n|---|---|---|---|\n" + rows + "\n\n"
        + length_gap_markdown(short, long, noise) + "\n\n"
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
    lines = ["| model | attention | KV heads / query heads | cache per token | weights "
             "| context window | cache = weights at |", "|---|---|---|---|---|---|---|"]
    for s in specs:
        beyond = "" if s.supports(crossover[s.name]) else " (beyond its context window)"
        lines.append(f"| {s.name} | {s.attention} | {s.kv_heads} / {s.query_heads} | "
                     f"{human_bytes(s.bytes_per_token(bpv))} | "
                     f"{human_bytes(s.weight_bytes(bpv))} | {s.window_label} | "
                     f"{crossover[s.name]:,} tokens × {batch} sequence(s){beyond} |")
    ratio = mine.query_heads // mine.kv_heads
    slide_note = "".join(
        f" {s.name} attends over a {s.sliding_window:,}-token sliding window, so a rolling-buffer "
        f"cache never needs more than {s.sliding_window:,} positions per sequence; the chart "
        "counts every position, as a plain cache would." for s in specs if s.sliding_window)
    return ("\n".join(lines) + f"\n\n*Theoretical, {bpv} bytes per value for weights and cache.* "
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
    rows = [f"| {r.question} | {r.prompt_tokens} | {r.reused_tokens} | "
            f"{r.ttft_full * 1000:.0f} ms | {r.ttft_reuse * 1000:.0f} ms | {r.speedup:.1f}× | "
            f"{'✓ same' if r.same else '✗ differ'} | {r.text!r} |" for r in runs]
    return (head + "\n\n| question | prompt tokens | reused | TTFT full | TTFT reused | speed-up "
            "| tokens | answer |\n|---|---|---|---|---|---|---|---|\n" + "\n".join(rows))
