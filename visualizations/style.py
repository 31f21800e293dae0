"""One look for every chart: a colour-blind-safe palette (Okabe–Ito), large fonts for a
projector, titled axes with units, and a caption naming the machine the numbers came from."""
from __future__ import annotations

import plotly.graph_objects as go

# Okabe & Ito (2008): distinguishable with the common forms of colour blindness.
PALETTE = {
    "blue": "#0072B2", "orange": "#E69F00", "green": "#009E73", "vermillion": "#D55E00",
    "sky": "#56B4E9", "purple": "#CC79A7", "yellow": "#F0E442", "grey": "#7F7F7F",
}
SEQUENCE = [PALETTE[k] for k in
            ("blue", "orange", "green", "vermillion", "sky", "purple", "yellow")]
MEASURED = "measured"
THEORETICAL = "theoretical"


def machine_caption(device: str, dtype: str, threads: int) -> str:
    """'Measured live on cpu · float32 · 2 threads' — the caption under every timing chart."""
    return f"Measured live on {device} · {dtype} · {threads} threads"


ALONE = "ran alone (the chat server paused)"


def info_caption(info, dtype: str | None = None, note: str = "", alone: bool = True) -> str:
    """The caption for a model's `ModelInfo` (read by attribute): device, dtype, threads,
    whether the measurement ran alone (lesson measurements pause the shared chat server), and
    an optional note such as 'median of 12 steps'."""
    cap = machine_caption(info.device, dtype or info.dtype, info.threads)
    parts = [cap] + ([ALONE] if alone else []) + ([note] if note else [])
    return " · ".join(parts)


def styled(fig: go.Figure, title: str, x_title: str, y_title: str, caption: str = "",
           height: int = 380) -> go.Figure:
    """Apply the shared layout: title, axis titles with units, caption, readable fonts."""
    fig.update_layout(
        title=dict(text=title, x=0.01, font=dict(size=18)),
        xaxis_title=x_title, yaxis_title=y_title,
        template="plotly_white", height=height, colorway=SEQUENCE,
        font=dict(size=14), margin=dict(l=70, r=20, t=60, b=100 if caption else 50),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0),
    )
    if caption:
        fig.add_annotation(text=caption, xref="paper", yref="paper", x=0, y=0, yshift=-62,
                           yanchor="top", showarrow=False, xanchor="left",
                           font=dict(size=12, color=PALETTE["grey"]))
    return fig


def empty_figure(message: str, height: int = 300) -> go.Figure:
    """A blank chart that says what to do to fill it (the empty state)."""
    fig = go.Figure()
    fig.add_annotation(text=message, xref="paper", yref="paper", x=0.5, y=0.5,
                       showarrow=False, font=dict(size=16, color=PALETTE["grey"]))
    fig.update_layout(template="plotly_white", height=height,
                      xaxis=dict(visible=False), yaxis=dict(visible=False),
                      margin=dict(l=20, r=20, t=20, b=20))
    return fig
