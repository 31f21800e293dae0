"""Lesson 5 tables: the memory plan, the sweep's measurements with their explanation, the
scheduler summary and the cost arithmetic, as markdown. Pure functions: records in, text out."""
from __future__ import annotations

from .model_card import human_bytes
from .noise_view import supports_verdict, withheld


def plan_table(plans) -> str:
    """Markdown: the memory each batch size needs vs the budget, computed before running."""
    rows = [f"| {p.batch} | {human_bytes(p.weight_bytes)} | {human_bytes(p.kv_bytes)} | "
            f"~{human_bytes(p.activation_bytes)} | {human_bytes(p.total_bytes)} | "
            f"{'✓ runs' if p.fits else '✗ skipped'} |" for p in plans]
    budget = human_bytes(plans[0].budget_bytes) if plans else "?"
    return (f"**Memory plan** (computed before running; budget {budget}):\n\n"
            "| batch | weights | KV cache (formula) | activations (estimate) | total | |\n"
            "|---|---|---|---|---|---|\n" + "\n".join(rows))


def sweep_table(upd, noise=None) -> str:
    """Markdown table of measured points, then the explanation with this run's numbers."""
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
    """Why throughput moved as it did: the weights read once for every row. Drawn only from a
    quiet run; a busy or unfinished one gets its two measured steps and no explanation."""
    gain, growth = big.tokens_per_s / one.tokens_per_s, big.step_seconds / one.step_seconds
    if not supports_verdict(noise):
        return (f"**Measured:** at batch {one.batch} a step took "
                f"{one.step_seconds * 1000:.0f} ms, at batch {big.batch} "
                f"{big.step_seconds * 1000:.0f} ms: **{growth:.1f}× the time for {big.batch}× "
                f"the tokens**, throughput from {one.tokens_per_s:.1f} to "
                f"{big.tokens_per_s:.1f} tokens/s (**{gain:.1f}×**; {withheld(noise)}).")
    return (f"**Why.** At batch 1 a step took {one.step_seconds * 1000:.0f} ms; reading the "
            f"weights and KV cache ({human_bytes(one.weight_bytes + one.cache_bytes)}) at the "
            f"measured {gbs:.1f} GB/s "
            f"takes at least {one.floor_seconds(gbs) * 1000:.0f} ms (theoretical). At batch "
            f"{big.batch} the step took {big.step_seconds * 1000:.0f} ms: **{growth:.1f}× the "
            f"time for {big.batch}× the tokens**, so throughput went from "
            f"{one.tokens_per_s:.1f} to {big.tokens_per_s:.1f} tokens/s (**{gain:.1f}×**). The "
            "weights are read once per step for all rows; each extra row adds only its own KV "
            "cache reads and its arithmetic. The price: each request now waits "
            f"{big.step_seconds * 1000:.0f} ms per token instead of "
            f"{one.step_seconds * 1000:.0f} ms.")


def scheduler_table(static, continuous) -> str:
    """Markdown: the measured summary of both schedulers, and whether their tokens agree."""
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
    """Markdown: cost per million tokens and per conversation at each measured batch size."""
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
    carried = (f" Later tokens of a conversation read a longer KV cache: the decode rate is "
               f"carried from the sweep's short context to the conversation's mean context "
               f"({prompt_tokens} in + half of {output_tokens} out = {context:,.0f} tokens), an "
               "estimate: the measured step plus its extra cache reads at the measured "
               "bandwidth, which they take at least, so the rate is a ceiling and the dollars a "
               "floor." if context else "")
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
