"""'This machine' in words: the roofline (bandwidth ÷ bytes per token = the decode ceiling,
beside the measured speed) and choosing a model size from published shapes."""
from __future__ import annotations

from .cards import human_bytes
from .glossary import NOTES
from .noise_view import busy_notice_html, reference_html, withheld


def model_sizes_md(rows, bandwidth_gbs: float, dtype: str, free_bytes: int,
                   measured_tokens_per_s: float | None = None, source: str = "",
                   share: bool = True) -> str:
    """The size table (`rows`: `SizeRow`s, the loaded model first) and what it means here.
    `source`: where the measured speed comes from, if not this quiet run; `share`: False if busy."""
    lines = [
        "### Choosing a model size",
        ("This model beside its larger siblings, from their published shapes. **Theoretical:** "
         f"weights at {dtype}, and the batch-1 decode ceiling = this machine's measured "
         f"{bandwidth_gbs:.1f} GB/s ÷ the weights' bytes (the KV cache left out)."),
        "",
        f"| model | parameters | weights ({dtype}) | weights (int8) | KV cache per token "
        f"| decode ceiling, batch 1 | fits in the {human_bytes(free_bytes)} free now |",
        "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r.shape.name} | {r.shape.parameters / 1e6:,.0f} M | {human_bytes(r.weight_bytes)} "
            f"| {human_bytes(r.int8_bytes)} | {human_bytes(r.kv_bytes_per_token)} "
            f"| {r.ceiling_tokens_per_s:,.1f} tokens/s | {'yes' if r.fits else '**no**'} |")
    if measured_tokens_per_s and len(rows) > 1:
        of = measured_tokens_per_s / rows[0].ceiling_tokens_per_s
        big = rows[-1]
        lines.append(
            f"\nThis model measured **{measured_tokens_per_s:.1f} tokens/s**"
            + (f" ({source})" if source else "")
            + (f", {of:.0%} of its ceiling. " if share else
               ": noisy (this machine was busy), so no share of its ceiling is drawn. ")
            + (f"{big.shape.name} could not beat **{big.ceiling_tokens_per_s:.1f} tokens/s** here "
               f"({rows[0].weight_bytes / big.weight_bytes:.0%} of this one's ceiling, for "
               f"{big.shape.parameters / rows[0].shape.parameters:.0f}× the size), at a share of "
               "it not this one's: a step's fixed per-operation cost is a smaller part of a bigger "
               "model's step. Choose the smallest model good enough for the task: every parameter "
               "is read for every token."))
    return "\n".join(lines)


def roofline_md(r, weight_bytes: int, noise=None, attempt: int = 0, reference=None,
                now=None) -> str:
    """The roofline in four lines and what the gap means; past the ceiling, its reason."""
    per_token = human_bytes(r.bytes_per_token)
    if r.impossible:
        again = " twice (the second time with the bandwidth read again)" if attempt else ""
        speed = (f"not a possible result, measured{again}: {r.impossible} One of the two "
                 "measurements was disturbed (most likely the bandwidth, measured low): measure "
                 "again")
    elif noise is not None and noise.busy:
        speed = (f"**{r.measured_tokens_per_s:.1f} tokens/s**, noisy: no share of the ceiling "
                 f"({withheld(noise)})")
    else:
        speed = f"**{r.measured_tokens_per_s:.1f} tokens/s**, **{r.fraction:.0%}** of the ceiling"
    head = busy_notice_html(noise) + reference_html(
        reference, "Decode speed", f"{r.measured_tokens_per_s or 0.0:.1f} tokens/s", noise, now,
        shown=lambda v: f"{v:.1f} tokens/s")
    return head + (
        f"- **Memory bandwidth (measured):** {r.bandwidth_gbs:.1f} GB/s, "
        "reading a 512 MiB (537 MB) buffer; measured once on this machine, the same figure "
        "every lesson uses.\n"
        f"- **Bytes read per decode step:** {per_token} "
        f"(all {human_bytes(weight_bytes)} of weights + the KV cache).\n"
        f"- **Ceiling (theoretical):** {r.bandwidth_gbs:.1f} GB/s ÷ {per_token} "
        f"= **{r.ceiling_tokens_per_s:.1f} tokens/s** at batch 1.\n"
        f"- **Decode speed (measured, median step: the forward pass and choosing the token, "
        f"its softmax and top candidates):** {speed}.\n\n"
        + NOTES["roofline_gap"])
