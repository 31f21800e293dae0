"""One look for every chart: a colour-blind-safe palette (Okabe–Ito), large fonts for a
projector, titled axes with units, and a caption naming the machine the numbers came from."""
from __future__ import annotations

import re

import plotly.graph_objects as go

# Okabe & Ito (2008): distinguishable with the common forms of colour blindness.
PALETTE = {
    "blue": "#0072B2", "orange": "#E69F00", "green": "#009E73", "vermillion": "#D55E00",
    "sky": "#56B4E9", "purple": "#CC79A7", "yellow": "#F0E442", "grey": "#7F7F7F",
}
SEQUENCE = [PALETTE[k] for k in
            ("blue", "orange", "green", "vermillion", "sky", "purple", "yellow")]
# Text a class must read is at least 4.5:1 on white (WCAG AA); the palette grey is 4.0:1.
CAPTION_GREY = "#595959"  # 7.0:1 on white
MEASURED = "measured"
THEORETICAL = "theoretical"


def contrast_ratio(fg: str, bg: str) -> float:
    """WCAG contrast ratio of two '#rrggbb' colours (1 to 21)."""
    def lum(hex_colour: str) -> float:
        rgb = [int(hex_colour.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4)]
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    hi, lo = sorted((lum(fg), lum(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def machine_caption(device: str, dtype: str, threads: int) -> str:
    """'Measured live on cpu · float32 · 2 threads' — the caption under every timing chart."""
    return f"Measured live on {device} · {dtype} · {threads} threads"


ALONE = "each timed pass ran alone on the compute thread"


def sharing_sentence(chats: int | None) -> str:
    """What else the app did while a lesson measured: each timed pass had the compute thread
    to itself, and the server answered `chats` visitors' chats between passes (counted during
    the run; None: not counted, so nothing is said about them). Other programs on the machine
    are judged apart (the busy notice).

    >>> sharing_sentence(0)
    'each timed pass ran alone on the compute thread; no chat was being served'
    >>> sharing_sentence(3)
    'each timed pass ran alone on the compute thread; the server answered 3 chats between passes'
    """
    if chats is None:
        return ALONE
    if chats == 0:
        return f"{ALONE}; no chat was being served"
    return f"{ALONE}; the server answered {chats} chat{'s' if chats != 1 else ''} between passes"


def info_caption(info, dtype: str | None = None, note: str = "", alone: bool = True,
                 chats: int | None = None) -> str:
    """The caption for a model's `ModelInfo` (read by attribute): device, dtype, threads,
    how the measurement shared the machine with the app's chat server (`sharing_sentence`:
    `chats` answered between its passes so far, None when not counted; `alone=False` for a
    view that times nothing of its own), and an optional note such as 'median of 12 steps'."""
    cap = machine_caption(info.device, dtype or info.dtype, info.threads)
    parts = [cap] + ([sharing_sentence(chats)] if alone else []) + ([note] if note else [])
    return " · ".join(parts)


TITLE_CHARS = 36  # a 19 px title line that fits a phone's chart (~325 px; 46 were cut)
CAPTION_CHARS = 48  # the same for the 13 px caption under it
AXIS_CHARS = 40  # and for a 15 px x-axis title


def wrapped_title(text: str, width: int = TITLE_CHARS) -> str:
    """A chart title broken into lines of about `width` characters (Plotly never wraps one,
    so a long title ran off a phone's screen). A bracketed group such as a tensor shape
    "[1, 3, 4, 64]" or "(KV head 1)" stays on one line; a title with "<br>" is left as is.

    >>> wrapped_title("Prefill is parallel: N prompt tokens in one forward pass")
    'Prefill is parallel: N prompt tokens<br>in one forward pass'
    """
    if "<br>" in text or len(text) <= width:
        return text
    units = re.findall(r"\[[^\]]*\]\S*|\([^)]{0,16}\)\S*|\S+", text)
    lines, line = [], ""
    for unit in units:
        if line and len(line) + 1 + len(unit) > width:
            lines.append(line)
            line = unit
        else:
            line = f"{line} {unit}" if line else unit
    return "<br>".join(lines + [line])


def styled(fig: go.Figure, title: str, x_title: str, y_title: str, caption: str = "",
           height: int = 380) -> go.Figure:
    """Apply the shared layout: title, axis titles with units, caption, readable fonts.

    The title (and the machine caption under it, as its subtitle) sit at the top of the whole
    figure, the legend at its bottom, both in figure ("container") coordinates: however many
    lines a legend wraps to on a phone, it grows away from the title, never over it."""
    entries = 0
    for trace in fig.data:  # a legend entry wider than a phone would run off its side
        if trace.name and trace.showlegend is not False:
            trace.name = wrapped_title(trace.name, 44)
            entries += 1
    sub = wrapped_title(caption, CAPTION_CHARS)
    # Plotly's automargin counts one subtitle line: each further line gets its room as padding
    # (a two-line caption printed over the plot's top row on a phone).
    extra = 34 * sub.count("<br>")
    fig.update_layout(
        title=dict(text=wrapped_title(title), x=0.01, xref="container", xanchor="left", y=1,
                   yref="paper", yanchor="bottom", automargin=True, pad=dict(b=12 + extra),
                   font=dict(size=19),
                   subtitle=dict(text=sub, font=dict(size=13, color=CAPTION_GREY))),
        xaxis_title=wrapped_title(x_title, AXIS_CHARS), yaxis_title=y_title,
        template="plotly_white", height=height + (24 * min(entries, 8) if entries > 1 else 0),
        colorway=SEQUENCE,
        font=dict(size=15), margin=dict(l=70, r=20, t=30, b=40, autoexpand=True),
        legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0,
                    xanchor="left", font=dict(size=14)),
    )
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    return fig


def empty_figure(message: str, height: int = 300) -> go.Figure:
    """A blank chart that says what to do to fill it (the empty state)."""
    fig = go.Figure()
    fig.add_annotation(text=message, xref="paper", yref="paper", x=0.5, y=0.5,
                       showarrow=False, font=dict(size=16, color=CAPTION_GREY))
    fig.update_layout(template="plotly_white", height=height,
                      xaxis=dict(visible=False), yaxis=dict(visible=False),
                      margin=dict(l=20, r=20, t=20, b=20))
    return fig
