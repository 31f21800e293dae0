"""This machine: the roofline (bandwidth ÷ bytes per token = the decode ceiling), choosing a model
size, and one decode step split by the profiler beside the bandwidth floor."""
from __future__ import annotations

import plotly.graph_objects as go

from .cards import human_bytes, md_table
from .glossary import NOTES
from .noise_view import busy_notice_html, reference_html, withheld
from .style import MEASURED, PALETTE, THEORETICAL, empty_figure, empty_state, styled

MEASURED_ROW = "one step<br>(measured)"
FLOOR_ROW = "bandwidth<br>floor"


def _on_gpu(p) -> bool:
    return p.kernels_per_step is not None


def segments(p) -> list[tuple[str, float, str]]:
    """(name, seconds per step, colour) of the measured step's three parts, in order."""
    gpu = _on_gpu(p)
    return [
        (f"matrix products ({'kernels, ' if gpu else ''}{MEASURED})", p.matmul_seconds,
         PALETTE["blue"]),
        (f"other {'kernels' if gpu else 'operations'} ({MEASURED})", p.other_ops_seconds,
         PALETTE["orange"]),
        ("GPU idle, waiting for the next launch" if gpu else
         "between operations: Python, framework", p.between_ops_seconds, PALETTE["vermillion"])]


def step_title(p) -> str:
    if _on_gpu(p):
        busy = p.device_busy_share or 0.0
        tail = ": launching sets the pace" if busy < 0.5 else ""
        return f"The GPU was busy {busy:.0%} of a decode step{tail}"
    return (f"A decode step here: {p.matmul_share:.0%} matrix products, "
            f"{p.overhead_share:.0%} everything else")


@empty_state("Press “Measure this machine”: one decode step, split by the profiler, appears here.")
def step_split_figure(p, floor_seconds: float, caption: str = "") -> go.Figure:
    fig = go.Figure()
    for name, seconds, colour in segments(p):
        fig.add_trace(go.Bar(
            y=[MEASURED_ROW], x=[seconds * 1000], orientation="h", name=name,
            marker_color=colour, text=[f"{seconds * 1000:.1f} ms"], textposition="inside",
            insidetextanchor="middle", hovertemplate=f"{name}: %{{x:.2f}} ms<extra></extra>"))
    fig.add_trace(go.Bar(
        y=[FLOOR_ROW], x=[floor_seconds * 1000], orientation="h",
        name=f"bytes read ÷ bandwidth ({THEORETICAL})", marker_color=PALETTE["grey"],
        text=[f"{floor_seconds * 1000:.1f} ms"], textposition="inside",
        insidetextanchor="middle", hovertemplate="floor: %{x:.2f} ms<extra></extra>"))
    fig.update_layout(barmode="stack", uniformtext=dict(minsize=12, mode="hide"),
                      legend_traceorder="normal")  # stacked bars list in reverse by default
    fig.update_yaxes(categoryorder="array", categoryarray=[FLOOR_ROW, MEASURED_ROW])
    return styled(fig, "One decode step, split", "ms per step (batch 1)", "", caption,
                  height=340, note=step_title(p) + ".")


def split_unreliable_md(p, noise) -> str:
    """What replaces the split when it did not hold up: the measured step, no parts."""
    why = (busy_notice_html(noise) if noise.busy else
           "*The profiler's split did not add up this run (a part came out at about 0 ms, or "
           "the parts at more than the step), so no part is shown: run again.*\n\n")
    return (why + f"- **One step (measured, median of {p.steps}):** "
            f"{p.step_seconds * 1000:.1f} ms ({1 / p.step_seconds:.1f} tokens/s). "
            "The split of it into matrix products and other operations was not reliable on "
            "this run, so none is drawn and nothing is concluded about what bounds the step.")


def split_unreliable_figure(p, message: str) -> go.Figure:
    return empty_figure(f"One step took {p.step_seconds * 1000:.1f} ms (measured); {message}.")


def _matmul_rate(weight_bytes: int, seconds: float, bandwidth_gbs: float) -> str:
    """': 538 MB in 20.4 ms is 26.3 GB/s, 98% of the measured bandwidth.' (and above 100%)"""
    if not weight_bytes or seconds <= 0 or bandwidth_gbs <= 0:
        return "."
    rate = weight_bytes / seconds / 1e9
    text = (f": {human_bytes(weight_bytes)} in {seconds * 1000:.1f} ms is {rate:,.1f} GB/s, "
            f"{rate / bandwidth_gbs:.0%} of the measured bandwidth.")
    if rate > bandwidth_gbs:
        text += (" Above 100%: the matrix products read memory faster than the simple sum that "
                 "measured the bandwidth, so that roof is a little low.")
    return text


def step_bound_md(bound, floor_seconds: float, bytes_per_token: int, bandwidth_gbs: float,
                  weight_bytes: int = 0, layers: int = 0) -> str:
    """The split in words, the dispatch bill, and (on a GPU) the captured race."""
    if bound is None:
        return "*Press **Measure this machine**: the profiler splits one decode step.*"
    p, race, ms = bound.profile, bound.race, 1000
    gpu = _on_gpu(p)
    per_layer = (p.matmul_ops_per_step - 1) / layers if layers else 0  # and the output head
    by_layer = (f" ({per_layer:.0f} per layer, and the output head)"
                if per_layer and per_layer == int(per_layer) else "")
    lines = [
        f"- **One step ({MEASURED}, median of {p.steps} after a warm-up step):** "
        f"{p.step_seconds * ms:.1f} ms ({1 / p.step_seconds:.1f} tokens/s), split below by "
        "the profiler's shares of its own steps.",
        f"- **Bandwidth floor ({THEORETICAL}):** {human_bytes(bytes_per_token)} read ÷ "
        f"{bandwidth_gbs:,.1f} GB/s = **{floor_seconds * ms:.1f} ms**: at the measured bandwidth a "
        f"step can be no faster. This step took {p.step_seconds / floor_seconds:.1f}× that.",
        f"- **Matrix products ({MEASURED}, profiler):** {p.matmul_seconds * ms:.1f} ms in "
        f"{p.matmul_ops_per_step:,.0f} products a step{by_layer}. They are the part that reads the "
        "weights" + _matmul_rate(weight_bytes, p.matmul_seconds, bandwidth_gbs)]
    if gpu:
        lines += [
            f"- **Other kernels ({MEASURED}):** {p.other_ops_seconds * ms:.1f} ms; the GPU ran "
            f"{p.kernels_per_step:,.0f} kernels a step and was busy "
            f"**{p.device_busy_share:.0%}** of it.",
            f"- **GPU idle ({MEASURED}, what is left):** {p.between_ops_seconds * ms:.1f} ms, "
            "waiting for Python to launch the next kernel."]
    else:
        lines += [
            f"- **Other operations ({MEASURED}):** {p.other_ops_seconds * ms:.1f} ms inside "
            f"{p.ops_per_step - p.matmul_ops_per_step:,.0f} small operations (norms, rotary "
            "embeddings, attention, cache appends, casts).",
            f"- **Between operations ({MEASURED}, what is left):** "
            f"{p.between_ops_seconds * ms:.1f} ms of Python and framework code."]
    slow_products = not weight_bytes or weight_bytes / max(p.matmul_seconds, 1e-12) / 1e9 < (
        0.9 * bandwidth_gbs)  # the products read below 90% of the measured bandwidth
    lines += [
        "- **What bounds this step (decided from the figures above):** "
        + bound.verdict(floor_seconds).sentence,
        f"- **The dispatch bill ({THEORETICAL}, from two measurements):** {p.ops_per_step:,.0f} "
        f"operations a step × {bound.tiny_op_seconds * 1e6:.2f} µs (one do-nothing operation, "
        f"measured here) ≈ **{bound.dispatch_seconds * ms:.1f} ms** a step before any arithmetic.",
        "",
        "The roofline's ceiling counts only the bytes a step must read. Every operation also "
        "pays a fixed cost to be " + ("launched" if gpu else "dispatched") + ", whatever its "
        "size, and this small model's step is thousands of tiny operations: that cost, with "
        "their own work (attention, copies, norms)"
        + (" and matrix products that fall short of the full bandwidth," if slow_products
           else ",") + " is the gap between the measured point and the roof. Fewer, larger "
        "operations (fused kernels, a compiled step, a bigger batch sharing each one) close it."]
    if race is not None and race.captured:
        same = ("the same tokens" if race.same_tokens else
                f"**different tokens from token {race.first_difference_at}**")
        lines += ["", ("**Captured step (measured now):** the whole step recorded once as a CUDA "
                       f"graph and replayed with one launch decoded {race.new_tokens} tokens at "
                       f"**{race.captured_tokens_per_s:,.0f} tokens/s** against "
                       f"{race.eager_tokens_per_s:,.0f} for the eager loop "
                       f"(**{race.speedup:.1f}×**), with {same}; recording it took "
                       f"{race.capture_seconds * ms:.0f} ms once.")]
    elif not gpu:
        lines += ["", ("On a GPU (an H200, measured elsewhere on 2026-11-30) launching a kernel "
                       "took longer than most of this model's kernels ran: a far more lopsided "
                       "split. A CUDA graph "
                       "(one launch per token) removes the gaps between launches, not the "
                       "kernels' own time: see *On a GPU* below.")]
    return "\n".join(lines)


def model_sizes_md(rows, bandwidth_gbs: float, dtype: str, free_bytes: int,
                   measured_tokens_per_s: float | None = None, source: str = "",
                   share: bool = True) -> str:
    """The size table (`rows`: `SizeRow`s, the loaded model first) and what it means here.
    `source`: where the measured speed comes from, if not this quiet run; `share`: False if busy."""
    lines = [
        "### Choosing a model size",
        ("This model beside its larger siblings, from their published shapes. **Theoretical:** "
         f"weights at {dtype}, and the batch-1 decode ceiling = this machine's measured "
         f"{bandwidth_gbs:.1f} GB/s ÷ the weights' bytes (the KV cache left out)."), "",
        md_table(f"model | parameters | weights ({dtype}) | weights (int8) | KV cache per token | "
                 f"decode ceiling, batch 1 | fits in the {human_bytes(free_bytes)} free now",
                 [[r.shape.name, f"{r.shape.parameters / 1e6:,.0f} M", human_bytes(r.weight_bytes),
                   human_bytes(r.int8_bytes), human_bytes(r.kv_bytes_per_token),
                   f"{r.ceiling_tokens_per_s:,.1f} tokens/s", "yes" if r.fits else "**no**"]
                  for r in rows])]
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
        f"- **Memory bandwidth (measured):** {r.bandwidth_gbs:.1f} GB/s, reading a 512 MiB (537 "
        "MB) buffer; measured once on this machine, the same figure every lesson uses.\n"
        f"- **Bytes read per decode step:** {per_token} (all {human_bytes(weight_bytes)} of "
        f"weights + the KV cache).\n"
        f"- **Ceiling (theoretical):** {r.bandwidth_gbs:.1f} GB/s ÷ {per_token} = "
        f"**{r.ceiling_tokens_per_s:.1f} tokens/s** at batch 1.\n"
        f"- **Decode speed (measured, median step: the forward pass and choosing the token, its "
        f"softmax and top candidates):** {speed}.\n\n"
        + NOTES["roofline_gap"])
