"""Reading a styled chart back in tests: its caption, its plot's height, and a colour's contrast
(the numbers the chart style rule in visualizations/style.py promises)."""
from __future__ import annotations

import plotly.graph_objects as go


def caption_text(fig: go.Figure) -> str:
    """The caption `styled` put under a chart's title, on one line ("" when none)."""
    return (fig.layout.title.subtitle.text or "").replace("<br>", " ")


def plot_height(fig: go.Figure) -> int:
    """Px the layout leaves for the plot area: height less the top and bottom margins."""
    return fig.layout.height - fig.layout.margin.t - fig.layout.margin.b


def contrast_ratio(fg: str, bg: str) -> float:
    """WCAG contrast ratio of two '#rrggbb' colours (1 to 21)."""
    def lum(hex_colour: str) -> float:
        rgb = [int(hex_colour.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4)]
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    hi, lo = sorted((lum(fg), lum(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)
