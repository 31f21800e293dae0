"""The one chart style rule, checked on every chart's layout (hand-made records, no model): a
one-line title short enough for the narrowest column, room for a plot of at least `PLOT_MIN`
px, y titles no longer than that plot, whole-number ticks on token axes, the headline points
inside the plot, and legends whose entries are their traces' colours."""
from __future__ import annotations

import math

import pytest

from chart_reading import caption_text, plot_height
from chart_samples import BATCH, MODES, decode_steps, figures
from visualizations import roofline_charts, timing_charts
from visualizations.style import PLOT_MIN, TITLE_CHARS, Y_AXIS_CHARS, one_line_title

FIGURES = figures()


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_chart_has_a_short_title_and_room_for_its_plot(name):
    fig = FIGURES[name]
    title = fig.layout.title.text
    assert "<br>" not in title and 0 < len(title) <= TITLE_CHARS, title
    assert plot_height(fig) >= PLOT_MIN
    for axis in fig.select_yaxes():
        for line in (axis.title.text or "").split("<br>"):
            assert len(line) <= Y_AXIS_CHARS, line


def test_a_long_title_moves_to_the_caption():
    title, note = one_line_title("Decode throughput rose, then levelled off, with batch size")
    assert len(title) <= TITLE_CHARS and title.endswith("…")
    assert note.startswith("Decode throughput rose, then levelled off")


def test_token_axes_tick_whole_numbers():
    fig = timing_charts.decode_latency_figure(decode_steps(3), "cap")
    assert fig.layout.xaxis.dtick == 1 and fig.layout.xaxis.tick0 == 0
    assert list(fig.layout.xaxis.range) == [-0.5, 2.5]
    long = timing_charts.decode_latency_figure(decode_steps(48), "cap")
    assert long.layout.xaxis.dtick == 5  # ten ticks at most, still whole numbers
    for name in ("kv grid", "kv bytes", "kv race", "batch padding"):
        assert float(FIGURES[name].layout.xaxis.dtick).is_integer(), name


def test_decode_legend_has_one_entry_per_colour():
    fig = timing_charts.decode_latency_figure(decode_steps(4), "cap", forced=[2])
    bars = [t for t in fig.data if t.type == "bar"]
    assert [(t.name.split(" (")[0].split(",")[0], t.marker.color) for t in bars] == [
        ("first token", "#E69F00"), ("decode step", "#0072B2"),
        ("your branch pick", "#CC79A7")]
    assert [list(t.x) for t in bars] == [[0], [1, 3], [2]]


def test_throughput_keeps_batch_16_inside_the_plot():
    fig = FIGURES["batch throughput"]
    low, high = fig.layout.yaxis.range
    top = max(p.tokens_per_s for p in BATCH)  # batch 16, above B × the batch-1 rate
    assert math.log10(top) < high and all(math.log10(y) > low for t in fig.data for y in t.y)
    assert "grows" in caption_text(fig) or "levelled" in caption_text(fig)


def test_quantization_roofline_spreads_the_modes_over_the_plot():
    fig = FIGURES["quant roofline"]
    speeds = [r.decode_tokens_per_s for r in MODES]
    low, high = fig.layout.yaxis.range
    assert fig.layout.yaxis.type != "log" and low == 0
    assert max(speeds) < high <= 2 * max(speeds)  # the fastest mode in the top half
    gpu = roofline_charts.roofline_figure([MODES[0], MODES[-1]], 4800.0)  # ceiling ~100× speeds
    assert gpu.layout.yaxis.type == "log"
    lo, hi = gpu.layout.yaxis.range
    assert all(lo < math.log10(s) < hi for s in (MODES[0].decode_tokens_per_s,
                                                 MODES[-1].decode_tokens_per_s))
