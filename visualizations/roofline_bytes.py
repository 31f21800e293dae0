"""This machine's roofline by bytes: measured decode tokens/s against the bytes one decode step
reads, under the curve the measured bandwidth sets (bandwidth ÷ bytes per token). 'This
machine' draws the loaded model's one point; lesson 6 draws one point per precision mode.
"""
from __future__ import annotations

import html
import math

import plotly.graph_objects as go

from .noise_view import supports_verdict, withheld
from .style import PALETTE, SEQUENCE, empty_figure, styled

MB = 1e6
BYTES_AXIS = "Bytes read per decode token (MB)"
WEIGHT_BYTES_AXIS = "Weight bytes per token (MB; KV cache not counted)"


def ceiling_at(bandwidth_gbs: float, bytes_per_token: float) -> float:
    """Theoretical decode ceiling when memory-bound: bandwidth ÷ bytes read per token (the
    engine's `ceiling_tokens_per_s`, restated: visualizations import no engine)."""
    return bandwidth_gbs * 1e9 / bytes_per_token if bytes_per_token > 0 else 0.0


def roofline_title(reports, bandwidth_gbs: float, noise=None) -> str:
    """Whether the mode with the fewest bytes per token decoded faster than the one with the
    most (on some kernels it does not), on a quiet finished run; else both speeds, no verdict."""
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
        return f"Decode speed against bytes per token: {speeds} ({withheld(noise)})"
    gain = small.decode_tokens_per_s / big.decode_tokens_per_s
    if gain >= FASTER:
        return (f"Fewer bytes per token, faster decode here: {small.key} {gain:.1f}× "
                f"{big.key}")
    return f"Fewer bytes per token, not faster here: {speeds} (the kernel sets the pace)"


FASTER = 1.2  # a speed-up the title calls "faster": well above run-to-run noise


def roofline_figure(reports, bandwidth_gbs: float, bandwidth_note: str = "",
                    caption: str = "", x_title: str = BYTES_AXIS,
                    height: int = 440, noise=None) -> go.Figure:
    """Measured decode tokens/s per mode at its bytes per token, under the bandwidth curve.
    Points and the ceiling are labelled on the chart: no legend, one height for any count."""
    if not reports:
        return empty_figure("Press “Compare modes” to measure each precision mode.")
    top = max(r.bytes_per_token for r in reports) * 1.15
    low = min(r.bytes_per_token for r in reports) * 0.7
    xs = [low + (top - low) * i / 99 for i in range(100)]
    fig = go.Figure([go.Scatter(
        x=[x / MB for x in xs], y=[ceiling_at(bandwidth_gbs, x) for x in xs],
        mode="lines",
        name=f"ceiling: {bandwidth_gbs:.1f} GB/s ÷ bytes per token (theoretical{bandwidth_note})",
        line=dict(color=PALETTE["grey"], dash="dash", width=3))])
    for i, r in enumerate(reports):
        share = r.decode_tokens_per_s / ceiling_at(bandwidth_gbs, r.bytes_per_token)
        # a simulated mode stores few bytes but rebuilds float weights each step: it reads more
        # than its x says, so it is drawn hollow and labelled, not as a point the line explains
        simulated = r.kernel.startswith("simulated")
        fig.add_trace(go.Scatter(
            x=[r.bytes_per_token / MB], y=[r.decode_tokens_per_s], mode="markers+text",
            name=f"{r.key} (measured)", text=[f"{r.key} (simulated)" if simulated else r.key],
            textposition="top center", showlegend=False,
            marker=dict(size=14, color=SEQUENCE[i % len(SEQUENCE)],
                        symbol="circle-open" if simulated else "circle"),
            hovertemplate=(f"{html.escape(r.label)}<br>%{{x:.0f}} MB per token<br>"
                           f"%{{y:.1f}} tokens/s ({share:.0%} of the ceiling)<br>"
                           f"{html.escape(r.kernel)}"
                           + ("<br>stored bytes; each step also rebuilds float weights, "
                              "so it reads more" if simulated else "")
                           + "<extra></extra>")))
    _speed_axis(fig, reports, bandwidth_gbs, top)
    # the ceiling named on its curve, not in a legend: a legend's two lines pushed lesson 6's
    # run button, cards and chart past one 1280×720 screen
    fig.add_annotation(x=top / MB, y=ceiling_at(bandwidth_gbs, top), xanchor="right",
                       yanchor="bottom", showarrow=False, text="ceiling (theoretical)",
                       font=dict(size=13, color=PALETTE["grey"]))
    fig.update_layout(showlegend=False)
    title = "Decode vs its ceiling" if len(reports) == 1 else "Bytes per token vs speed"
    return styled(fig, title, x_title, "Decode speed (tokens/s)", caption, height=height,
                  note=roofline_title(reports, bandwidth_gbs, noise) + ".")


def _speed_axis(fig: go.Figure, reports, bandwidth_gbs: float, top_bytes: float) -> None:
    """Linear from 0 when the ceiling is within 4× the fastest point, else log (on a GPU the
    ceiling is ~100× the measured speeds: a linear axis pressed every mode onto its floor)."""
    fastest = max(r.decode_tokens_per_s for r in reports)
    slowest = min(r.decode_tokens_per_s for r in reports)
    lowest_ceiling = ceiling_at(bandwidth_gbs, top_bytes)
    if lowest_ceiling <= 4 * fastest:
        fig.update_yaxes(range=[0, max(fastest * 1.35, lowest_ceiling * 1.1)])
    else:
        fig.update_yaxes(type="log", range=[math.log10(slowest / 2), math.log10(fastest * 3)])


