"""Lesson 5 in words: progress, padding, the tables from memory plan to dollars, and the closing
note from what this machine measured."""
from __future__ import annotations

from collections.abc import Sequence

from .batching_charts import throughput_trend
from .cards import WAITING, Card, cards_html, human_bytes, md_table, times
from .glossary import NOTES
from .noise_view import busy_notice_html, reference_card, supports_verdict, withheld

VIRTUAL_CLOCK = NOTES["virtual_clock"]
NO_SWEEP_YET = "Run the batch sweep first: costs come from its measured throughput."
NO_PROMPTS = "Type a few prompts, one per line."
NO_SWEEP_CARDS = NOTES["no_sweep_cards"]
NO_CHAIN = NOTES["no_chain"]


def sweep_progress_markdown(update, message: str) -> str:
    return f"{'✅' if update.finished else '⏳'} {message}"


def sweep_cards(sweep, noise=None, reference=None) -> str:
    """Batch 1's and the largest batch's tokens/s and their ratio (busy: the quiet `reference`)."""
    points = sorted(sweep.points, key=lambda p: p.batch) if sweep is not None else []
    if not points:
        return NO_SWEEP_CARDS
    one = points[0]
    first = Card(f"batch {one.batch} tok/s", f"{one.tokens_per_s:.1f}", "measured")
    if len(points) < 2:
        return cards_html([first, Card("largest batch tok/s", WAITING, "next batch size")])
    big = points[-1]
    # a busy run's quiet reference joins the row: the cards keep one row above the chart
    quiet = reference_card(reference, f"batch {big.batch} ÷ {one.batch}", noise)
    quiet = [quiet] if quiet is not None else []
    if big.impossible and sweep.finished:  # measured twice, still impossible: not a result
        return cards_html([first, Card(f"batch {big.batch} tok/s", "—", "impossible"),
                           Card(f"batch {big.batch} ÷ {one.batch}", "—", "not shown")] + quiet
                          ) + "\n\n" + impossible_markdown(big.impossible)
    note = ("busy machine: noisy" if noise is not None and noise.busy else
            {"grows": "grows, measured", "fell": "fell here, measured",
             "levelled": "levelled off, measured"}[throughput_trend(points)]
            if supports_verdict(noise) and sweep.finished else
            "measured" if sweep.finished else "so far, measured")
    return cards_html([  # the ratio of the two figures beside it (paired gain: the closing note)
        first,
        Card(f"batch {big.batch} tok/s", f"{big.tokens_per_s:.1f}", "measured"),
        Card(f"batch {big.batch} ÷ {one.batch}", times(big.tokens_per_s / one.tokens_per_s),
             note)] + quiet)


def impossible_markdown(reason: str) -> str:
    return (f"**Not a possible result**: {reason} This machine was disturbed while measuring "
            "(measured once more: still impossible), so no gain is shown: run the sweep again.")


def shared_sweep_message(when: str, message: str) -> str:
    return (f"Measured earlier on this machine at {when} and shared with every visitor (same "
            f"settings). {message}")


def scheduler_step_markdown(scheduler: str, step) -> str:
    return (f"⏳ {scheduler} batching: forward pass {step.index + 1} ({step.kind}, "
            f"{len(step.rows)} rows, {step.seconds * 1000:.0f} ms) at t = {step.start:.2f} s")


def scheduler_done_markdown(measured_earlier_at: str | None = None) -> str:
    note = ("✅ Both schedulers served every request." if measured_earlier_at is None else
            f"✅ Measured earlier on this machine at {measured_earlier_at}, shared with every "
            "visitor.")
    return f"{note} {VIRTUAL_CLOCK}"


def prompt_labels(lines: Sequence[str]) -> list[str]:
    return [t if len(t) <= 24 else t[:23] + "…" for t in lines]


def padding_markdown(prompts: int, padded: int, total: int) -> str:
    if not prompts:
        return NO_PROMPTS
    return (f"A batched prefill of these {prompts} prompts computes **{total} positions**, of "
            f"which **{padded} are padding** ({padded / total:.0%} of the work and KV cache, "
            "spent on nothing; the attention mask keeps answers unchanged). Continuous batching "
            "prefills each group of newcomers alone, trimming padding columns no row needs.")


def closing_note(info, sweep, schedules, noise=None) -> str:
    """The closing note from the last finished sweep and scheduler comparison (either None)."""
    if noise is None and sweep is not None:
        noise = getattr(sweep, "noise", None)
    parts = [f"### What this machine showed ({info.device}, {info.dtype}, {info.threads} threads)"]
    impossible = next((p.impossible for p in sweep.points if p.impossible), None) \
        if sweep and sweep.points else None
    if impossible:
        parts.append(f"- {impossible_markdown(impossible)}")
    elif sweep and sweep.points:
        one, big = sweep.points[0], sweep.points[-1]
        gain, longer = big.gain_over(one), big.step_seconds / one.step_seconds
        parts.append(cards_html([
            Card(f"Batch {one.batch}", f"{one.tokens_per_s:.1f} tok/s", "measured"),
            Card(f"Batch {big.batch}", f"{big.tokens_per_s:.1f} tok/s", "measured, all rows"),
            Card("Throughput gain", times(gain.estimate), f"each step {longer:.1f}× as long")]))
        parts.append("- " + (f"Decode throughput: **{one.tokens_per_s:.1f} tokens/s at batch "
                             f"{one.batch}**, **{big.tokens_per_s:.1f} tokens/s at batch "
                             f"{big.batch}** ({gain.estimate:.1f}×), while each step took "
                             f"**{longer:.1f}× as long**, measured: gain {gain.label()}, each "
                             "batch's 25th-percentile step against 1-row steps timed right beside "
                             "it, so neither a few slowed steps nor the load changing between "
                             "batch sizes counts."))
        one_thread = [p.batch for p in sweep.points if p.threads == 1]
        if one_thread and info.threads > 1:
            parts.append("- " + (f'Batch {", ".join(map(str, one_thread))} timed at 1 CPU thread: '
                                 f'a quick try found it faster than {info.threads} threads (other '
                                 'programs were using the cores).'))
        if noise is not None and noise.busy:  # the numbers stand; no verdict drawn from them
            parts.insert(1, busy_notice_html(noise))
            parts.append("- No verdict on where batching stops paying from this run.")
        else:
            parts.append(f"- {where_batching_stops_paying(sweep.points)}")
    else:
        parts.append("- Run the batch sweep to fill in throughput at batch 1 and at the "
                     "largest batch.")
    if schedules:
        s, c = schedules.static.summary, schedules.continuous.summary
        parts.append(f"- On the “{schedules.trace}” workload (max batch {schedules.max_batch}): "
                     f"static {_served(s)}; continuous {_served(c)}.")
    else:
        parts.append("- Serve the workload to compare static and continuous batching here.")
    return "\n".join(parts)


NEAR_LINEAR = 0.8  # step time grew at least 80% as fast as the batch: batching stopped paying
MARGIN = 0.05  # within 5% (plus the run's own spread) of that line: too close to call


def _spread(p) -> float:
    """(max - min) ÷ median of a point's timed steps: the run's own noise."""
    times = sorted(p.step_times)
    if len(times) < 2:
        return 0.0
    median = times[len(times) // 2]
    return (times[-1] - times[0]) / median if median > 0 else 0.0


def _pair(a, b) -> tuple[str, float, float]:
    """("stops" | "pays" | "close", rows ratio, step-time ratio) for one step up in batch."""
    rows, slower = b.batch / a.batch, b.step_seconds / a.step_seconds
    edge, tol = NEAR_LINEAR * rows, MARGIN + max(_spread(a), _spread(b))
    return ("stops" if slower >= edge * (1 + tol) else "pays" if slower <= edge * (1 - tol)
            else "close"), rows, slower


def where_batching_stops_paying(points) -> str:
    """The first step up in batch from which every larger one grew the step time clearly past
    `NEAR_LINEAR` of the batch's growth (`MARGIN` plus the run's spread: too close to call)."""
    pts = sorted(points, key=lambda p: p.batch)
    if len(pts) < 2:
        return "Measure more than one batch size to see where batching stops paying."
    pairs = [(a, b, *_pair(a, b)) for a, b in zip(pts, pts[1:])]
    for i, (a, b, _kind, rows, slower) in enumerate(pairs):
        if all(k == "stops" for _, _, k, _, _ in pairs[i:]):
            return (f"Batching stopped paying between batch {a.batch} and {b.batch}: {rows:.0f}× "
                    f"the requests made each step {slower:.1f}× as long, so throughput grew only "
                    f"{rows / slower:.2f}×, and every larger batch measured did the same: each "
                    "extra request adds about its full share of step time.")
    close = next((p for p in pairs if p[2] == "close"), None)
    if close is not None:
        a, b, _, rows, slower = close
        return (f"Too close to call on this run: from batch {a.batch} to {b.batch} the step grew "
                f"{slower:.2f}× for {rows:.0f}× the requests, within this run's noise of the line "
                f"where batching stops paying ({NEAR_LINEAR * rows:.2f}×). Run the sweep again to "
                "see which side it falls on.")
    return (f"Up to batch {pts[-1].batch}, the step time grew clearly less than the batch did: "
            "batching still paid at the largest size measured here (it stops once the step time "
            "grows about in proportion to the batch).")


def _served(s) -> str:
    return (f"{s.throughput:.1f} tokens/s, mean latency {s.mean_latency:.1f} s, p95 "
            f"{s.p95_latency:.1f} s, mean TTFT {s.mean_ttft:.2f} s")


def plan_table(plans) -> str:
    rows = [[p.batch, human_bytes(p.weight_bytes), human_bytes(p.kv_bytes),
             f"~{human_bytes(p.activation_bytes)}", human_bytes(p.total_bytes),
             "✓ runs" if p.fits else "✗ skipped"] for p in plans]
    budget = human_bytes(plans[0].budget_bytes) if plans else "?"
    return (f"**Memory plan** (computed before running; budget {budget}):\n\n"
            + md_table("batch | weights | KV cache (formula) | activations (estimate) | total | ",
                       rows))


def sweep_table(upd, noise=None) -> str:
    pts, gbs = upd.points, upd.bandwidth_gbs
    if not pts:
        return ""
    text = md_table("batch | step (median, measured) | floor (theoretical) | total tokens/s | "
                    "tokens/s per request | prefill tokens/s",
                    [[p.batch, f"{p.step_seconds * 1000:.0f} ms",
                      f"{p.floor_seconds(gbs) * 1000:.0f} ms", f"{p.tokens_per_s:.1f}",
                      f"{p.per_request_tokens_per_s:.1f}", f"{p.prefill_tokens_per_s:.0f}"]
                     for p in pts])
    if len(pts) > 1:
        text += "\n\n" + _why(pts[0], pts[-1], gbs, noise)
    return text


def _why(one, big, gbs: float, noise=None) -> str:
    """Why throughput moved as it did (a busy or unfinished run: its two steps, no why)."""
    gain, growth = big.tokens_per_s / one.tokens_per_s, big.step_seconds / one.step_seconds
    if not supports_verdict(noise):
        return (f"**Measured:** at batch {one.batch} a step took {one.step_seconds * 1000:.0f} ms, "
                f"at batch {big.batch} {big.step_seconds * 1000:.0f} ms: **{growth:.1f}× the time "
                f"for {big.batch}× the tokens**, throughput from {one.tokens_per_s:.1f} to "
                f"{big.tokens_per_s:.1f} tokens/s (**{gain:.1f}×**; {withheld(noise)}).")
    return (f"**Why.** At batch 1 a step took {one.step_seconds * 1000:.0f} ms; reading the "
            f"weights and KV cache ({human_bytes(one.weight_bytes + one.cache_bytes)}) at the "
            f"measured {gbs:.1f} GB/s takes at least {one.floor_seconds(gbs) * 1000:.0f} ms "
            f"(theoretical). At batch {big.batch} it took {big.step_seconds * 1000:.0f} ms: "
            f"**{growth:.1f}× the time for {big.batch}× the tokens**, so throughput went from "
            f"{one.tokens_per_s:.1f} to {big.tokens_per_s:.1f} tokens/s (**{gain:.1f}×**): the "
            "weights are read once per step for all rows, each extra row adds only its own KV "
            "cache reads and arithmetic. The price: each request waits "
            f"{big.step_seconds * 1000:.0f} ms per token instead of {one.step_seconds * 1000:.0f} "
            "ms.")


def scheduler_table(static, continuous) -> str:
    rows = [[s.scheduler, f"{s.throughput:.2f}", f"{s.mean_latency:.2f} s",
             f"{s.p95_latency:.2f} s", f"{s.mean_ttft:.2f} s", f"{s.p95_ttft:.2f} s",
             s.forward_passes, s.wasted_row_steps] for s in (static.summary, continuous.summary)]
    same = all(a.tokens == b.tokens for a, b in zip(static.requests, continuous.requests))
    agree = ("Every request got **exactly the same tokens** from both schedulers (greedy)."
             if same else
             "⚠️ Some requests got different tokens (numerical ties between batch shapes).")
    return (md_table("scheduler | tokens/s | mean latency | p95 latency | mean TTFT | p95 TTFT | "
                     "forward passes | finished rows computed anyway", rows)
            + f"\n\n{static.summary.output_tokens} output tokens from "
            f"{static.summary.requests} requests. " + agree)


def cost_table(costs, prompt_tokens: int, output_tokens: int) -> str:
    context = costs[0].context_tokens if costs else 0
    rows = [[c.batch, f"{c.measured_output_tokens_per_s:.1f}"]
            + ([f"{c.output_tokens_per_s:.1f}"] if context else [])
            + [f"${c.usd_per_million_output:,.2f}", f"${c.usd_per_million_input:,.2f}",
               f"${c.usd_per_conversation:,.5f}", f"{c.conversations_per_hour:,.0f}"]
            for c in costs]
    at_context = (f"output tokens/s at {context:,.0f} tokens of context (estimate) | "
                  if context else "")
    header = ("batch | output tokens/s (measured, short context) | " + at_context
              + "$ / M output | $ / M input | $ / conversation | conversations / hour")
    carried = (f" Later tokens read a longer KV cache: the decode rate is carried from the sweep's "
               f"short context to the conversation's mean ({prompt_tokens} in + half of "
               f"{output_tokens} out = {context:,.0f} tokens), an estimate (the measured step plus "
               "its extra cache reads at the measured bandwidth, at least that long), so the rate "
               "is a ceiling and the dollars a floor." if context else "")
    carried += (" The input rate is the sweep's own short prefill, measured; a longer prompt's "
                "per-token rate differs.")
    return (md_table(header, rows)
            + "\n\n*Arithmetic: $ per million = price per hour ÷ (tokens/s × 3,600) × "
            f"1,000,000. A conversation is {prompt_tokens} tokens in and {output_tokens} out, "
            f"at 100% utilisation.{carried}*")


def mode_cost_table(modes, price_per_hour: float) -> str:
    """Lesson 6's precision modes priced at batch 1 from their measured decode rates."""
    if not modes:
        return ("\n\n*Run lesson 6's comparison: each precision mode's measured speed is then "
                "priced here too.*")
    base = next((m for m in modes if m.key == "fp32"), None)
    rows = [[m.key, f"{m.decode_tokens_per_s:.1f}",  # $ per million: price ÷ tokens per hour
             f"${price_per_hour / (m.decode_tokens_per_s * 3600) * 1e6:,.2f}",
             f"{base.decode_tokens_per_s / m.decode_tokens_per_s:.2f}×" if base is not None
             else ""] for m in modes]
    return ("\n\n**Each precision mode at batch 1** (decode measured in lesson 6, on this "
            "machine): fewer bytes per weight change the price only through speed.\n\n"
            + md_table("mode | output tokens/s (batch 1, measured) | $ / M output | cost × fp32",
                       rows))


def _usd(x: float) -> str:
    return "—" if x == float("inf") else f"${x:,.2f}" if x >= 0.1 else f"${x:.5f}"


def measured_chain_md(c, caption: str = "") -> str:
    if c is None:
        return NO_CHAIN
    memory = (f"{human_bytes(c.memory_bytes)} memory budget − {human_bytes(c.weight_bytes)} "
              f"weights = {human_bytes(c.left_bytes)} for caches ÷ "
              f"{human_bytes(c.kv_bytes_per_sequence)} per {c.tokens_held:,.0f}-token conversation "
              f"= **{c.fits:,} sequences fit**")
    here = f"**This machine** ({caption}):" if caption else "**This machine:**"
    if not c.batch:
        return (f"{here} {memory}: fewer than the smallest batch the sweep measured "
                f"({c.largest_measured}), so no measured rate applies.")
    which = (f"more than the sweep measured, so the rate is its largest batch's, {c.batch}"
             if c.fits > c.largest_measured else
             f"so the batch is the largest measured one that fits, {c.batch}")
    return (f"{here} {memory}; {which}: **{c.tokens_per_s:,.1f} tokens/s** (the cost table's "
            f"rate: measured, carried to the conversation's context) → "
            f"**{_usd(c.usd_per_million)} per million output tokens** → "
            f"**{_usd(c.usd_per_conversation)} per conversation** at ${c.usd_per_hour:,.2f}/h.")


def published_md(chains, gpu_source: str) -> str:
    rows = [[c.label.split(" on ")[0], human_bytes(c.kv_bytes_per_token),
             human_bytes(c.kv_bytes_per_sequence), f"{c.fits:,}"]
            + ([f"{c.tokens_per_s:,.0f} ({c.bound})", _usd(c.usd_per_million),
                _usd(c.usd_per_conversation)] if c.batch else ["weights do not fit", "—", "—"])
            for c in chains]
    held = f"{chains[0].tokens_held:,.0f}" if chains else "?"
    where = chains[0].label.split(" on ")[-1] if chains else "a GPU"
    return ((f"**Published models on {where}** (theoretical: {gpu_source}; 16-bit weights and "
             f"cache, {held}-token conversations, as many as fit):") + "\n\n"
            + md_table(f"model | KV per token | per {held}-token sequence | sequences that fit | "
                       "output tokens/s (ceiling, bound) | $ / M output | $ / conversation", rows))


def levers_md(chains, model: str, cache_ceiling: float) -> str:
    if not chains:
        return ""
    first = chains[0].usd_per_conversation
    rows = [[c.label, f"{c.fits:,}", f"{c.batch:,}", human_bytes(c.kv_bytes_per_sequence),
             f"{c.tokens_per_s:,.0f}", _usd(c.usd_per_conversation),
             f"{first / c.usd_per_conversation:,.1f}×"] for c in chains if c.batch]
    return (f"**The levers together** ({model}, same GPU and conversation, theoretical): one "
            "cost per conversation as each lever is added.\n\n"
            + md_table("lever | sequences that fit | batch | cache held per sequence | output "
                       "tokens/s (ceiling) | $ / conversation | cheaper than one at a time", rows)
            + "\n\n" + ("Once the caches fill memory, each step reads mostly caches: with a 16-bit "
                        "cache, tokens/s can only approach bandwidth ÷ (KV bytes per token × mean "
                        f"context) = {cache_ceiling:,.0f}; more sequences only bring it closer, "
                        "fewer cache bytes per token raise it."))


def chain_md(measured, published, gpu_source: str, lever_chains, lever_model: str,
             cache_ceiling: float, caption: str = "") -> str:
    return "\n\n".join([
        "#### From KV memory to dollars", measured_chain_md(measured, caption),
        published_md(published, gpu_source), levers_md(lever_chains, lever_model, cache_ceiling),
        NOTES["chain_formulas"]])
