"""Lesson 6 charts: bytes per weight against speed and quality, from `ModeReport`s."""
from __future__ import annotations

import html

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import PALETTE, SEQUENCE, empty_state, styled

MB = 1e6
DIFFERS = f"background:{PALETTE['orange']}55;border-bottom:2px solid {PALETTE['vermillion']}"


@empty_state("Bars per mode appear as each one is measured.")
def mode_bars_figure(reports, caption: str = "") -> go.Figure:
    """Four small bar charts, two by two: size, speed, agreement, perplexity per mode."""
    keys = [r.key for r in reports]
    panels = [
        ("Weights (MB)", [r.weight_bytes / MB for r in reports], "{:.0f}"),
        ("Decode (tokens/s)", [r.decode_tokens_per_s for r in reports], "{:.1f}"),
        ("Same top-1 as fp32 (%)", [100 * r.top1_agreement for r in reports], "{:.0f}"),
        ("Perplexity (lower: better)", [r.perplexity for r in reports], "{:.2f}"),
    ]
    fig = make_subplots(rows=2, cols=2, horizontal_spacing=0.2, vertical_spacing=0.16)
    for n, (title, values, fmt) in enumerate(panels):
        row, col = divmod(n, 2)
        fig.add_trace(go.Bar(x=keys, y=values, name=title, showlegend=False,
                             marker_color=[SEQUENCE[i % len(SEQUENCE)] for i in range(len(keys))],
                             text=[fmt.format(v) for v in values], textposition="outside",
                             cliponaxis=False), row=row + 1, col=col + 1)
    fig = styled(fig, "Each precision mode", "", "", caption, height=560,
                 note="Size, speed and quality, each measured.")
    for n, (title, _, _) in enumerate(panels):  # each panel named by its y axis
        fig.update_yaxes(title_text=title, rangemode="tozero", row=n // 2 + 1, col=n % 2 + 1)
    return fig


def mode_table(reports) -> tuple[list[str], list[list]]:
    """(headers, rows) for a table of every measured number per mode."""
    headers = ["mode", "weights (MB)", "× fp32", "read per token (MB)", "prefill (ms)",
               "long prefill (s)", "decode (tok/s)", "top-1 agree (%)",
               "agree where fp32 decided (%)", "KL (nats)", "perplexity", "kernel"]
    rows = [[r.key, round(r.weight_bytes / MB, 1), round(r.ratio_to_fp32, 3),
             round(r.bytes_per_token / MB, 1), round(r.prefill_seconds * 1000),
             f"{r.text_prefill_seconds:.2f} ({r.text_tokens} tok)",
             round(r.decode_tokens_per_s, 1), round(100 * r.top1_agreement, 1),
             f"{100 * r.top1_decided:.0f} ({r.decided_positions} positions)",
             round(r.kl_mean, 4), round(r.perplexity, 2), r.kernel] for r in reports]
    return headers, rows


def first_difference(reference_ids, ids) -> int | None:
    """Index of the first token that differs from the reference (None if all the same)."""
    shorter = None if len(reference_ids) == len(ids) else min(len(reference_ids), len(ids))
    return next((i for i, (a, b) in enumerate(zip(reference_ids, ids)) if a != b), shorter)


def _token_spans(ids, pieces, reference_ids) -> str:
    out = []
    for i, (tid, piece) in enumerate(zip(ids, pieces)):
        text = html.escape(piece).replace("\n", "↵")
        if i < len(reference_ids) and reference_ids[i] == tid:
            out.append(f"<span class='q6-tok' style=''>{text}</span>")
        else:
            out.append(f"<span class='q6-tok q6-diff' style='{DIFFERS};'>{text}</span>")
    return "".join(out)


def side_by_side_html(reports, reference_key: str = "fp32") -> str:
    """Each mode's greedy text, tokens that differ from fp32's at the same position highlighted."""
    if not reports:
        return "<p><i>Generated texts appear here, side by side.</i></p>"
    ref = next((r for r in reports if r.key == reference_key), reports[0])
    cards = []
    for r in reports:
        first = first_difference(ref.token_ids, r.token_ids)
        verdict = ("identical to fp32" if first is None
                   else f"first differs at token {first + 1} of {len(r.token_ids)}")
        cards.append(
            f"<div class='q6-card' style='border:1px solid #ddd;border-radius:8px;padding:8px;"
            f"margin:4px 0'><b>{html.escape(r.key)}</b> <small>({html.escape(r.label)}; "
            f"{verdict})</small><div style='white-space:pre-wrap;margin-top:4px'>"
            f"{_token_spans(r.token_ids, r.pieces, ref.token_ids)}</div></div>")
    legend = (f"<small>Same prompt, greedy decoding. <span style='{DIFFERS}'>Highlighted</span> "
              "tokens differ from fp32 at the same position; after the first difference each text "
              "follows its own path, so later highlights are expected.</small>")
    return legend + "".join(cards)
