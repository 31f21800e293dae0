"""One look for every chart: a colour-blind-safe palette (Okabe–Ito), large fonts for a
projector, titled axes with units, and a caption naming the machine the numbers came from."""
from __future__ import annotations

import functools
import re
from collections.abc import Callable

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
ALONE = "each timed pass had the model to itself"


def sharing_sentence(chats: int | None) -> str:
    """What shared the compute thread: `chats` answered between passes (None: not counted)."""
    if chats is None:
        return ALONE
    if chats == 0:
        return f"{ALONE}; no chat was served"
    return f"{ALONE}; {chats} chat{'s' if chats != 1 else ''} answered between passes"


def info_caption(info, dtype: str | None = None, note: str = "", alone: bool = True,
                 chats: int | None = None) -> str:
    """'Measured live on cpu · float32 · 2 threads', then `sharing_sentence` and a `note`."""
    cap = f"Measured live on {info.device} · {dtype or info.dtype} · {info.threads} threads"
    parts = [cap] + ([sharing_sentence(chats)] if alone else []) + ([note] if note else [])
    return " · ".join(parts)


TITLE_CHARS = 34  # one 17-px title line in the narrowest column a chart is shown in (~320 px)
CAPTION_CHARS = 50  # a line of the 12-px caption under it, on a phone (~320 px)
AXIS_CHARS = 30  # a line of a 15-px x-axis title, clear of a colour bar on a phone
Y_AXIS_CHARS = 26  # a line of a rotated y-axis title: no longer than the smallest plot is tall
PLOT_MIN = 200  # px: the plot area itself (inside the axes) never gets less than this
LEGEND_WIDTH = 300  # px a legend has on a phone: `styled` reserves its rows at this width
TOP_MIN = 100  # px: Gradio keeps at least this above a labelled chart (its label badge)
LABEL_ROOM = 2  # px above the title (Gradio's label badge over a chart is hidden: style.css)


def wrapped_title(text: str, width: int = TITLE_CHARS) -> str:
    """Text broken into lines of about `width` characters (Plotly never wraps); a bracketed
    group such as "[1, 3, 4, 64]" stays on one line.

    >>> wrapped_title("Prefill is parallel: N prompt tokens in one forward pass", 36)
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


def one_line_title(title: str, note: str = "") -> tuple[str, str]:
    """(title, note): a title that came out long cut to one short line (a head before ": "
    kept), what did not fit moved to the note that opens the caption.

    >>> one_line_title("Padding: 2 of 6 positions are filler")
    ('Padding', '2 of 6 positions are filler')
    """
    title = title.replace("<br>", " ")
    if len(title) <= TITLE_CHARS:
        return title, note
    head, _, rest = title.partition(": ")
    if rest and len(head) <= TITLE_CHARS:
        return head, " ".join(t for t in (rest[0].upper() + rest[1:], note) if t)
    cut = title[:TITLE_CHARS - 1].rsplit(" ", 1)[0]
    return cut + "…", " ".join(t for t in (title, note) if t)


def legend_rows_px(names: list[str]) -> int:
    """Height (px) of a horizontal legend of these entries, packed as Plotly packs them."""
    rows, used, tallest = [], 0, 0
    for name in names:
        lines = name.split("<br>")
        entry = 40 + 8.2 * max(len(line) for line in lines)
        if used and used + entry > LEGEND_WIDTH:
            rows.append(tallest)
            used, tallest = 0, 0
        used, tallest = used + entry, max(tallest, len(lines))
    rows.append(tallest)
    return sum(6 + 19 * n for n in rows if n)


def styled(fig: go.Figure, title: str, x_title: str, y_title: str, caption: str = "",
           height: int = 380, note: str = "", legend_inside: bool = False) -> go.Figure:
    """The one chart style: a one-line title, `note` then the caption under it, axis titles,
    a plot area of at least `PLOT_MIN` px on a phone, the legend at the bottom
    (`legend_inside`: in the plot's top-left corner, for a chart that stays short)."""
    entries = []
    for trace in fig.data:  # a legend entry wider than a phone would run off its side
        if trace.name and trace.showlegend is not False and trace.legendgroup not in {
                e[1] for e in entries if e[1]}:
            trace.name = wrapped_title(trace.name, 44)
            entries.append((trace.name, trace.legendgroup))
    title, note = one_line_title(title, note)
    sub = "<br>".join(wrapped_title(t, CAPTION_CHARS) for t in (note, caption) if t)
    x_text = wrapped_title(x_title, AXIS_CHARS) if x_title else ""
    x_lines = max([x_text.count("<br>") + 1 if x_text else 0] + [
        a.title.text.count("<br>") + 1 for a in fig.select_xaxes() if a.title.text])
    sub_lines = sub.count("<br>") + 1 if sub else 0
    top = max(LABEL_ROOM + 38 + 16 * sub_lines, TOP_MIN)
    shown = len(entries) > 1 or (entries and fig.layout.showlegend)
    legend = legend_rows_px([e[0] for e in entries]) if shown and not legend_inside else 0
    bottom = 50 + 20 * x_lines + legend + _slanted_labels_px(fig) + 8  # 10 px to spare
    fig.update_layout(  # title and caption placed from the top, under Gradio's label badge
        title=dict(text=title, x=0.01, xref="container", xanchor="left", y=1,
                   yref="container", yanchor="top", automargin=False, pad=dict(t=LABEL_ROOM),
                   font=dict(size=17),
                   subtitle=dict(text=sub, font=dict(size=12, color=CAPTION_GREY))),
        xaxis_title=x_text, yaxis_title=wrapped_title(y_title, Y_AXIS_CHARS),
        template="plotly_white", height=max(height, PLOT_MIN + top + bottom), colorway=SEQUENCE,
        font=dict(size=15), margin=dict(l=70, r=20, t=top, b=bottom, autoexpand=True),
        legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", xref="container",
                    x=0, xanchor="left", font=dict(size=14)))
    if legend_inside:
        fig.update_layout(legend=dict(orientation="v", yref="paper", y=1, yanchor="top",
                                      xref="paper", x=0.01, bgcolor="rgba(255,255,255,0.85)"))
    fig.for_each_yaxis(lambda a: a.update(title_text=wrapped_title(a.title.text, Y_AXIS_CHARS))
                       if a.title.text else None)
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    return fig


def line_trace(x, y, name: str, colour: str, width: float = 3, dash: str | None = None,
               mode: str = "lines+markers", **trace) -> go.Scatter:
    """A line in the one style: a measurement solid, with markers; theory `dash`ed."""
    return go.Scatter(x=x, y=y, mode=mode, name=name,
                      line=dict(color=colour, width=width, dash=dash), **trace)


def _slanted_labels_px(fig: go.Figure) -> int:
    """Room for the category labels Plotly slants under the x axis of a narrow chart."""
    labels = [str(x) for t in fig.data if getattr(t, "orientation", None) != "h" and t.x is not None
              for x in t.x if isinstance(x, str)]
    longest = max((len(x.split("<br>")[0]) for x in labels), default=0)
    return min(int(7.5 * longest * 0.8), 110) if longest > 6 and len(set(labels)) > 1 else 0


def integer_ticks(fig: go.Figure, count: int, start: int = 0, **kw) -> go.Figure:
    """Whole-number ticks (1, 2, 5, 10, … apart) on an x axis of token numbers from `start`."""
    step = next(s for s in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10**4)
                if count / s <= 10 or s == 10**4)
    fig.update_xaxes(tickmode="linear", tick0=start if step == 1 else 0, dtick=step,
                     tickformat="d", **kw)
    return fig


def empty_figure(message: str) -> go.Figure:
    """A blank chart that says what to do to fill it (the empty state)."""
    fig = go.Figure()
    fig.add_annotation(text=message, xref="paper", yref="paper", x=0.5, y=0.5,
                       showarrow=False, font=dict(size=16, color=CAPTION_GREY))
    fig.update_layout(template="plotly_white", height=300,
                      xaxis=dict(visible=False), yaxis=dict(visible=False),
                      margin=dict(l=20, r=20, t=20, b=20))
    return fig


def empty_state(message: str) -> Callable:
    """A chart builder that draws `message` while its records (first argument) are empty."""
    def decorate(build: Callable[..., go.Figure]) -> Callable[..., go.Figure]:
        @functools.wraps(build)
        def chart(records, *args, **kwargs) -> go.Figure:
            return build(records, *args, **kwargs) if records else empty_figure(message)
        return chart
    return decorate
