"""Lesson 5's chain from KV memory to dollars, as markdown: this machine's (measured, from the
visitor's sweep), a few published models on a published GPU (theoretical), and the explainer's
levers added one at a time. Pure: `Chain` records (inference/experiments/memory_to_dollars.py)
in, text out.
"""
from __future__ import annotations

from .model_card import human_bytes

NO_CHAIN = ("*Run the batch sweep (tab 1): this machine's chain starts from its measured "
            "throughput.*")
FORMULAS = ("*Sequences that fit = (memory − weights) ÷ (KV bytes per token × tokens held); "
            "tokens/s = batch ÷ step time; $ per million = price per hour ÷ (tokens/s × 3,600) "
            "× 10⁶. Theoretical rows: step = max(bytes read ÷ bandwidth, FLOPs ÷ peak), a "
            "ceiling a real server reaches only part of. Left out: activations, the allocator's "
            "slack, idle time, the provider's margin.*")


def _usd(x: float) -> str:
    return "—" if x == float("inf") else f"${x:,.2f}" if x >= 0.1 else f"${x:.5f}"


def measured_chain_md(c, caption: str = "") -> str:
    """This machine's chain in one paragraph (measured rate, formula memory)."""
    if c is None:
        return NO_CHAIN
    memory = (f"{human_bytes(c.memory_bytes)} memory budget − {human_bytes(c.weight_bytes)} "
              f"weights = {human_bytes(c.left_bytes)} for caches ÷ "
              f"{human_bytes(c.kv_bytes_per_sequence)} per {c.tokens_held:,.0f}-token "
              f"conversation = **{c.fits:,} sequences fit**")
    here = f"**This machine** ({caption}):" if caption else "**This machine:**"
    if not c.batch:
        return (f"{here} {memory}: fewer than the smallest batch the sweep measured "
                f"({c.largest_measured}), so no measured rate applies.")
    if c.fits > c.largest_measured:
        which = (f"more than the sweep measured, so the rate is its largest batch's, "
                 f"{c.batch}")
    else:
        which = f"so the batch is the largest measured one that fits, {c.batch}"
    return (f"{here} {memory}; {which}: **{c.tokens_per_s:,.1f} tokens/s** (the "
            f"cost table's rate: measured, carried to the conversation's context) → "
            f"**{_usd(c.usd_per_million)} per million output tokens** → "
            f"**{_usd(c.usd_per_conversation)} per conversation** at ${c.usd_per_hour:,.2f}/h.")


def published_md(chains, gpu_source: str) -> str:
    """A few published models on one GPU (theoretical), one row each."""
    rows = [f"| {c.label.split(' on ')[0]} | {human_bytes(c.kv_bytes_per_token)} | "
            f"{human_bytes(c.kv_bytes_per_sequence)} | {c.fits:,} | "
            + (f"{c.tokens_per_s:,.0f} ({c.bound}) | {_usd(c.usd_per_million)} | "
               f"{_usd(c.usd_per_conversation)} |" if c.batch else
               "weights do not fit | — | — |") for c in chains]
    held = f"{chains[0].tokens_held:,.0f}" if chains else "?"
    where = chains[0].label.split(" on ")[-1] if chains else "a GPU"
    return (f"**Published models on {where}** (theoretical: {gpu_source}; 16-bit weights and "
            f"cache, {held}-token conversations, as many as fit):\n\n"
            f"| model | KV per token | per {held}-token sequence | sequences that fit | "
            "output tokens/s (ceiling, bound) | $ / M output | $ / conversation |\n"
            "|---|---|---|---|---|---|---|\n" + "\n".join(rows))


def levers_md(chains, model: str, cache_ceiling: float) -> str:
    """The levers added one at a time (theoretical), each row's cost against the first."""
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
            + f"\n\nOnce the caches fill memory, each step reads mostly caches: with a 16-bit "
            f"cache, tokens/s can only approach bandwidth ÷ (KV bytes per token × mean context) "
            f"= {cache_ceiling:,.0f}, however many sequences fit. More sequences bring it "
            "closer; only fewer cache bytes per token raise it.")


def chain_md(measured, published, gpu_source: str, lever_chains, lever_model: str,
             cache_ceiling: float, caption: str = "") -> str:
    """The whole section: the chain here, the published models, the levers, the formulas."""
    return "\n\n".join([
        "#### From KV memory to dollars", measured_chain_md(measured, caption),
        published_md(published, gpu_source), levers_md(lever_chains, lever_model, cache_ceiling),
        FORMULAS])
