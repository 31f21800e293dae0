"""This machine's roofline, two ways: measured decode tokens/s against the bytes a step reads,
under bandwidth ÷ bytes per token; and achieved GFLOP/s against arithmetic intensity under the
bandwidth roof and the flat compute roof that meet at the ridge."""
from __future__ import annotations

import html
import math

import plotly.graph_objects as go

from .cards import human_bytes, md_table
from .noise_view import busy_notice_html, supports_verdict, withheld
from .style import PALETTE, SEQUENCE, THEORETICAL, empty_figure, empty_state, line_trace, styled

MB = 1e6
BYTES_AXIS = "Bytes read per decode token (MB)"
WEIGHT_BYTES_AXIS = "Weight bytes per token (MB; KV cache not counted)"
PASS_KINDS = {"decode": ("decode, batch 1 (measured)", PALETTE["vermillion"]),  # legend, colour
              "batch": ("decode, batch sweep (measured)", PALETTE["orange"]),
              "prefill": ("prefill (measured)", PALETTE["blue"])}
FASTER = 1.2  # a speed-up the title calls "faster": well above run-to-run noise


def _kind(label: str) -> str:
    return ("prefill" if label.startswith("prefill") else
            "decode" if label.endswith("batch 1") else "batch")


def _hover(roof, p) -> str:
    share = p.gflops / roof.attainable_gflops(p.intensity)
    return (f"{p.label}<br>{p.intensity:.2f} FLOPs per byte<br>{p.gflops:.1f} GFLOP/s "
            f"({share:.0%} of its roof)<br>{p.seconds * 1000:.0f} ms, "
            f"{human_bytes(p.bytes_read)} read<extra></extra>")


def two_roof_figure(roof, caption: str = "") -> go.Figure:
    if roof is None or not roof.points:
        return empty_figure("Press “Measure this machine”: both roofs and the passes appear here.")
    xs = [p.intensity for p in roof.points] + [roof.ridge]
    low, high = min(xs) / 3, max(xs) * 3
    grid = [low * (high / low) ** (i / 119) for i in range(120)]
    fig = go.Figure(line_trace(
        grid, [roof.attainable_gflops(x) for x in grid],
        f"roofs ({THEORETICAL}): {roof.bandwidth_gbs:.1f} GB/s × intensity, capped at "
        f"{roof.peak_gflops:,.0f} GFLOP/s (both measured)", PALETTE["grey"], dash="dash",
        mode="lines"))
    for kind, (name, colour) in PASS_KINDS.items():
        pts = [p for p in roof.points if _kind(p.label) == kind]
        if pts:
            fig.add_trace(go.Scatter(
                x=[p.intensity for p in pts], y=[p.gflops for p in pts], mode="markers+text",
                name=name, text=[p.label.split(", ")[-1] for p in pts], textposition="top center",
                marker=dict(size=13, color=colour), hovertemplate=[_hover(roof, p) for p in pts]))
    # The ridge as a trace, not a shape: a shape's x on a log axis is read as log10(x).
    bottom = min(p.gflops for p in roof.points) / 3
    fig.add_trace(line_trace(
        [roof.ridge, roof.ridge], [bottom, roof.peak_gflops],
        f"ridge point: {roof.ridge:.1f} FLOPs per byte ({THEORETICAL})", PALETTE["grey"],
        width=2, dash="dot", mode="lines", hoverinfo="skip"))
    fig.update_xaxes(type="log", range=[math.log10(low), math.log10(high)])
    fig.update_yaxes(type="log", range=[math.log10(bottom), math.log10(roof.peak_gflops * 2)])
    return styled(fig, "Each pass under the two roofs",
                  "Arithmetic intensity (FLOPs per byte read, log)",
                  "Achieved GFLOP/s (log)", caption, height=460)


def compute_roof_md(roof, dtype: str, noise=None) -> str:
    """Both roofs, the ridge, a row per measured pass, and what the picture says."""
    if roof is None or not roof.points:
        return ""
    judged = supports_verdict(noise)
    table = md_table(
        "pass | GFLOPs (theoretical) | bytes read | FLOPs per byte | time (ms, measured) | "
        "achieved GFLOP/s | of its roof | bound by",
        [[p.label, f"{p.flops / 1e9:,.1f}", human_bytes(p.bytes_read), f"{p.intensity:,.2f}",
          f"{p.seconds * 1000:,.0f}", f"{p.gflops:,.1f}",
          f"{p.gflops / roof.attainable_gflops(p.intensity):.0%}",
          roof.verdict(p).label if judged else f"— ({withheld(noise)})"] for p in roof.points])
    decode = next((p for p in roof.points if p.label == "decode, batch 1"), None)
    prefill = next((p for p in roof.points if p.label.startswith("prefill")), None)
    lines = [
        busy_notice_html(noise) + f"- **Compute roof (measured):** {roof.peak_gflops:,.0f} "
        f"GFLOP/s, large matrix products timed back to back in {dtype}.",
        "- " + (f"**Ridge point (theoretical):** {roof.peak_gflops:,.0f} GFLOP/s ÷ "
                f"{roof.bandwidth_gbs:.1f} GB/s = **{roof.ridge:.1f} FLOPs per byte**. Left of it "
                "a pass can go no faster than memory allows, right of it than arithmetic allows; "
                "what bound it here (launches or dispatch can, first) is the last column."),
        "", table, ""]
    if decode is not None:
        rows_to_ridge = roof.ridge / decode.intensity
        lines.append(f'Decode at batch 1 does **{decode.intensity:.2f} FLOPs per byte**, '
                      f'{rows_to_ridge:.0f}× left of the ridge: the bandwidth roof is the most it '
                      f'could reach.{" " + roof.verdict(decode).sentence if judged else ""} A '
                      'decode step at batch B reads the weights once for B rows, so its intensity '
                      f'grows about B-fold: near **B ≈ {rows_to_ridge:.0f}** its ceiling meets the '
                      'ridge, and past it each extra row adds its own arithmetic time (the batch '
                      'sweep measures how much).')
    if prefill is not None:
        verdict = roof.verdict(prefill)
        lines.append(
            f"\n{prefill.label.capitalize()} does **{prefill.intensity:,.0f} FLOPs per byte**. "
            + (verdict.sentence if judged else f"What bounded it: {withheld(noise)}."))
        if decode is not None and judged:
            lines.append(contrast_sentence(roof.verdict(decode).kind, verdict.kind))
    return "\n".join(lines)


def contrast_sentence(decode_kind: str, prefill_kind: str) -> str:
    """The explainer's contrast, said as measured only when this run's verdicts show it."""
    if decode_kind == "memory" and prefill_kind == "compute":
        return ("That is the explainer's contrast, measured here: prefill is bound by "
                "arithmetic, decode by memory.")
    return ("The explainer's rule of thumb (prefill bound by arithmetic, decode by memory) is "
            "for a large model; this run's shares above say what bounded each pass of this "
            "small one here.")


def ceiling_at(bandwidth_gbs: float, bytes_per_token: float) -> float:
    return bandwidth_gbs * 1e9 / bytes_per_token if bytes_per_token > 0 else 0.0


def roofline_title(reports, bandwidth_gbs: float, noise=None) -> str:
    """Whether the mode with the fewest bytes per token decoded fastest (quiet runs only)."""
    if len(reports) == 1:
        r = reports[0]
        share = r.decode_tokens_per_s / ceiling_at(bandwidth_gbs, r.bytes_per_token)
        return (f"Decode here: {r.decode_tokens_per_s:.1f} tokens/s, {share:.0%} of the "
                "bandwidth ceiling")
    small = min(reports, key=lambda r: r.bytes_per_token)
    big = max(reports, key=lambda r: r.bytes_per_token)
    speeds = (f"{small.key} {small.decode_tokens_per_s:.1f} vs {big.key} "
              f"{big.decode_tokens_per_s:.1f} tokens/s")
    if not supports_verdict(noise):
        return f"Decode: {speeds} ({withheld(noise)})"  # two caption lines, as a verdict takes
    gain = small.decode_tokens_per_s / big.decode_tokens_per_s
    if gain >= FASTER:
        return (f"Fewer bytes per token, faster decode here: {small.key} {gain:.1f}× {big.key}")
    return f"Fewer bytes per token, not faster here: {speeds} (the kernel sets the pace)"


@empty_state("Press “Compare modes” to measure each precision mode.")
def roofline_figure(reports, bandwidth_gbs: float, bandwidth_note: str = "",
                    caption: str = "", x_title: str = BYTES_AXIS,
                    height: int = 440, noise=None) -> go.Figure:
    """Measured decode tokens/s per mode at its bytes per token, under the bandwidth curve."""
    top = max(r.bytes_per_token for r in reports) * 1.15
    low = min(r.bytes_per_token for r in reports) * 0.7
    xs = [low + (top - low) * i / 99 for i in range(100)]
    fig = go.Figure([line_trace(
        [x / MB for x in xs], [ceiling_at(bandwidth_gbs, x) for x in xs],
        f"ceiling: {bandwidth_gbs:.1f} GB/s ÷ bytes per token (theoretical{bandwidth_note})",
        PALETTE["grey"], dash="dash", mode="lines")])
    for i, r in enumerate(reports):
        share = r.decode_tokens_per_s / ceiling_at(bandwidth_gbs, r.bytes_per_token)
        # a simulated mode rebuilds float weights each step: it reads more than its x says
        simulated = r.kernel.startswith("simulated")
        fig.add_trace(go.Scatter(
            x=[r.bytes_per_token / MB], y=[r.decode_tokens_per_s], mode="markers+text",
            name=f"{r.key} (measured)", text=[f"{r.key} (simulated)" if simulated else r.key],
            textposition="top center", showlegend=False,
            marker=dict(size=14, color=SEQUENCE[i % len(SEQUENCE)],
                        symbol="circle-open" if simulated else "circle"),
            hovertemplate=(f"{html.escape(r.label)}<br>%{{x:.0f}} MB per token<br>%{{y:.1f}} "
                           f"tokens/s ({share:.0%} of the ceiling)<br>{html.escape(r.kernel)}"
                           + ("<br>stored bytes; each step also rebuilds float weights, "
                              "so it reads more" if simulated else "")
                           + "<extra></extra>")))
    # y linear from 0 when the ceiling is within 4× the fastest point, else log (a GPU's)
    fastest = max(r.decode_tokens_per_s for r in reports)
    slowest = min(r.decode_tokens_per_s for r in reports)
    lowest_ceiling = ceiling_at(bandwidth_gbs, top)
    if lowest_ceiling <= 4 * fastest:
        fig.update_yaxes(range=[0, max(fastest * 1.35, lowest_ceiling * 1.1)])
    else:
        fig.update_yaxes(type="log", range=[math.log10(slowest / 2), math.log10(fastest * 3)])
    fig.add_annotation(x=top / MB, y=lowest_ceiling, xanchor="right",
                       yanchor="bottom", showarrow=False, text="ceiling (theoretical)",
                       font=dict(size=13, color=PALETTE["grey"]))
    fig.update_layout(showlegend=False)
    title = "Decode vs its ceiling" if len(reports) == 1 else "Bytes per token vs speed"
    return styled(fig, title, x_title, "Decode speed (tokens/s)", caption, height=height,
                  note=roofline_title(reports, bandwidth_gbs, noise) + ".")
