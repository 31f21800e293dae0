"""Lesson 5 tables, as markdown: the memory plan, the sweep with its explanation, the scheduler
summary, the cost arithmetic, and the chain from KV memory to dollars (this machine's, measured;
published models on a published GPU and the explainer's levers, theoretical)."""
from __future__ import annotations

from .cards import human_bytes
from .glossary import NOTES
from .noise_view import supports_verdict, withheld

NO_CHAIN = NOTES["no_chain"]


def plan_table(plans) -> str:
    rows = [f"| {p.batch} | {human_bytes(p.weight_bytes)} | {human_bytes(p.kv_bytes)} | "
            f"~{human_bytes(p.activation_bytes)} | {human_bytes(p.total_bytes)} | "
            f"{'✓ runs' if p.fits else '✗ skipped'} |" for p in plans]
    budget = human_bytes(plans[0].budget_bytes) if plans else "?"
    return (f"**Memory plan** (computed before running; budget {budget}):\n\n"
            "| batch | weights | KV cache (formula) | activations (estimate) | total | |\n"
            "|---|---|---|---|---|---|\n" + "\n".join(rows))


def sweep_table(upd, noise=None) -> str:
    pts, gbs = upd.points, upd.bandwidth_gbs
    if not pts:
        return ""
    rows = [f"| {p.batch} | {p.step_seconds * 1000:.0f} ms | {p.floor_seconds(gbs) * 1000:.0f} ms "
            f"| {p.tokens_per_s:.1f} | {p.per_request_tokens_per_s:.1f} "
            f"| {p.prefill_tokens_per_s:.0f} |" for p in pts]
    text = ("| batch | step (median, measured) | floor (theoretical) | total tokens/s | "
            "tokens/s per request | prefill tokens/s |\n|---|---|---|---|---|---|\n"
            + "\n".join(rows))
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
    rows = []
    for res in (static, continuous):
        s = res.summary
        rows.append(f"| {s.scheduler} | {s.throughput:.2f} | {s.mean_latency:.2f} s | "
                    f"{s.p95_latency:.2f} s | {s.mean_ttft:.2f} s | {s.p95_ttft:.2f} s | "
                    f"{s.forward_passes} | {s.wasted_row_steps} |")
    same = all(a.tokens == b.tokens for a, b in zip(static.requests, continuous.requests))
    agree = ("Every request got **exactly the same tokens** from both schedulers (greedy)."
             if same else
             "⚠️ Some requests got different tokens (numerical ties between batch shapes).")
    return ("| scheduler | tokens/s | mean latency | p95 latency | mean TTFT | p95 TTFT | "
            "forward passes | finished rows computed anyway |\n"
            "|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)
            + f"\n\n{static.summary.output_tokens} output tokens from "
            f"{static.summary.requests} requests. " + agree)


def cost_table(costs, prompt_tokens: int, output_tokens: int) -> str:
    context = costs[0].context_tokens if costs else 0
    rows = [f"| {c.batch} | {c.measured_output_tokens_per_s:.1f} | "
            + (f"{c.output_tokens_per_s:.1f} | " if context else "")
            + f"${c.usd_per_million_output:,.2f} | ${c.usd_per_million_input:,.2f} | "
            f"${c.usd_per_conversation:,.5f} | {c.conversations_per_hour:,.0f} |" for c in costs]
    at_context = (f"output tokens/s at {context:,.0f} tokens of context (estimate) | "
                  if context else "")
    head = ("| batch | output tokens/s (measured, short context) | " + at_context
            + "$ / M output | $ / M input | $ / conversation | conversations / hour |\n"
            + "|---" * (7 if context else 6) + "|\n")
    carried = (f" Later tokens read a longer KV cache: the decode rate is carried from the sweep's "
               f"short context to the conversation's mean ({prompt_tokens} in + half of "
               f"{output_tokens} out = {context:,.0f} tokens), an estimate (the measured step plus "
               "its extra cache reads at the measured bandwidth, at least that long), so the rate "
               "is a ceiling and the dollars a floor." if context else "")
    carried += (" The input rate is the sweep's own short prefill, measured; a longer prompt's "
                "per-token rate differs.")
    return (head + "\n".join(rows)
            + "\n\n*Arithmetic: $ per million = price per hour ÷ (tokens/s × 3,600) × "
            f"1,000,000. A conversation is {prompt_tokens} tokens in and {output_tokens} out, "
            f"at 100% utilisation.{carried}*")


def mode_cost_table(modes, price_per_hour: float) -> str:
    """Lesson 6's precision modes priced at batch 1 from their measured decode rates."""
    if not modes:
        return ("\n\n*Run lesson 6's comparison: each precision mode's measured speed is then "
                "priced here too.*")
    base = next((m for m in modes if m.key == "fp32"), None)
    rows = []
    for m in modes:
        usd = price_per_hour / (m.decode_tokens_per_s * 3600) * 1e6
        ratio = (f"{base.decode_tokens_per_s / m.decode_tokens_per_s:.2f}×"
                 if base is not None else "")
        rows.append(f"| {m.key} | {m.decode_tokens_per_s:.1f} | ${usd:,.2f} | {ratio} |")
    return ("\n\n**Each precision mode at batch 1** (decode measured in lesson 6, on this "
            "machine): fewer bytes per weight change the price only through speed.\n\n"
            "| mode | output tokens/s (batch 1, measured) | $ / M output | cost × fp32 |\n"
            "|---|---|---|---|\n" + "\n".join(rows))


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
    rows = [f"| {c.label.split(' on ')[0]} | {human_bytes(c.kv_bytes_per_token)} | "
            f"{human_bytes(c.kv_bytes_per_sequence)} | {c.fits:,} | "
            + (f"{c.tokens_per_s:,.0f} ({c.bound}) | {_usd(c.usd_per_million)} | "
               f"{_usd(c.usd_per_conversation)} |" if c.batch else
               "weights do not fit | — | — |") for c in chains]
    held = f"{chains[0].tokens_held:,.0f}" if chains else "?"
    where = chains[0].label.split(" on ")[-1] if chains else "a GPU"
    return ((f"**Published models on {where}** (theoretical: {gpu_source}; 16-bit weights and "
             f"cache, {held}-token conversations, as many as fit):") + "\n\n"
            f"| model | KV per token | per {held}-token sequence | sequences that fit | "
            "output tokens/s (ceiling, bound) | $ / M output | $ / conversation |\n"
            "|---|---|---|---|---|---|---|\n" + "\n".join(rows))


def levers_md(chains, model: str, cache_ceiling: float) -> str:
    if not chains:
        return ""
    first = chains[0].usd_per_conversation
    rows = [f"| {c.label} | {c.fits:,} | {c.batch:,} | {human_bytes(c.kv_bytes_per_sequence)} "
            f"| {c.tokens_per_s:,.0f} | {_usd(c.usd_per_conversation)} | "
            f"{first / c.usd_per_conversation:,.1f}× |" for c in chains if c.batch]
    return (f"**The levers together** ({model}, same GPU and conversation, theoretical): one "
            "cost per conversation as each lever is added.\n\n"
            "| lever | sequences that fit | batch | cache held per sequence | output tokens/s "
            "(ceiling) | $ / conversation | cheaper than one at a time |\n"
            "|---|---|---|---|---|---|---|\n" + "\n".join(rows)
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
