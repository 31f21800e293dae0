"""Charts never collapse, in a real browser: every chart the lessons draw, at a phone (390 px),
a projector at 150% zoom (853 px) and a projector (1280 px), keeps a plot area of at least
`PLOT_MIN` px and a title on one line that fits its chart, below Gradio's label badge and
above its caption, which stays above the plot.

The charts come from hand-made records (tests/chart_samples.py) in a small Gradio Blocks with
the app's CSS and theme, laid out as the lessons lay them out (Decode's two charts side by
side), so the test takes seconds instead of the minute the real app
needs to load its model. Plot sizes are read from Plotly's own layout (`_fullLayout._size`,
what is left after its automatic margins), never from screenshots; a screenshot of each width
lies under test-artifacts/screenshots/ for a person to look at.
"""
from __future__ import annotations

import socket

import pytest

from chart_samples import figures
from e2e_browser import screenshot, wait_until
from visualizations.style import PLOT_MIN

WIDTHS = [390, 853, 1280]
# Charts the lessons put side by side (gr.Row: Decode's two); the rest fill the column's width.
ROWS = [("decode candidates", "decode timing")]

MEASURE = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(g => {
  const id = g.closest('[id^=chart-]').id.slice(6);
  const size = g._fullLayout._size, box = g.getBoundingClientRect();
  const title = g.querySelector('.gtitle');
  const t = title ? title.getBoundingClientRect() : null;
  const cap = g.querySelector('.gtitle-subtitle');
  const c = cap ? cap.getBoundingClientRect() : null;
  const plotTop = g.querySelector('.nsewdrag').getBoundingClientRect().top;
  const badge = g.closest('.block').querySelector('[data-testid=block-label]');
  const labelBottom = badge ? badge.getBoundingClientRect().bottom : -1e9;
  return {id, plot: size.h, width: box.width, lines: title ? title.querySelectorAll(
      'tspan.line').length || 1 : 0, captionRight: c ? c.right - box.left : 0,
    titleLeft: t ? t.left - box.left : 0, titleRight: t ? t.right - box.left : 0,
    overlap: Math.max(c ? c.bottom - plotTop : 0, t && c ? t.bottom - c.top : 0,
                      t ? t.bottom - plotTop : 0, t ? labelBottom - t.top : 0)}; })"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def chart_page():
    """The sample charts served by a small Blocks with the app's CSS; its URL."""
    import gradio as gr

    from lessons.common.lesson_text import lesson_text

    figs = figures()
    paired = {name for row in ROWS for name in row}
    with gr.Blocks() as demo:
        for row in ROWS:
            with gr.Row():
                for name in row:
                    gr.Plot(figs[name], label=name, elem_id="chart-" + name.replace(" ", "-"))
        for name, fig in figs.items():
            if name not in paired:
                gr.Plot(fig, label=name, elem_id="chart-" + name.replace(" ", "-"))
    port = _free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True,
                css=lesson_text("style.css"), quiet=True,
                theme=gr.themes.Soft(font=["system-ui", "sans-serif"]))
    yield f"http://127.0.0.1:{port}", len(figs)
    demo.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_every_chart_keeps_its_plot_and_a_one_line_title(browser, chart_page, width):
    url, count = chart_page
    page = browser.new_page()
    page.set_viewport_size({"width": width, "height": 900})
    try:
        page.goto(url)
        wait_until(lambda: page.evaluate(
            "() => Array.from(document.querySelectorAll('.js-plotly-plot'))"
            ".filter(g => g._fullLayout && g.querySelector('.main-svg')).length") == count,
            60, "every chart drawn")
        rows = wait_until(lambda: (r := page.evaluate(MEASURE)) and all(x["width"] for x in r)
                          and r, 30, "charts sized")
        screenshot(page, f"charts-{width}")
    finally:
        page.close()
    report = {r["id"]: (round(r["plot"]), round(r["width"])) for r in rows}
    print(f"plot heights at {width} px:", report)
    short = {r["id"]: round(r["plot"]) for r in rows if r["plot"] < PLOT_MIN - 1}
    assert not short, f"plot areas under {PLOT_MIN} px at {width} px: {short}"
    wrapped = [r["id"] for r in rows if r["lines"] != 1]
    assert not wrapped, f"titles not on one line at {width} px: {wrapped}"
    cut = [r["id"] for r in rows if r["titleLeft"] < -1
           or max(r["titleRight"], r["captionRight"]) > r["width"] + 1]
    assert not cut, f"titles or captions wider than their chart at {width} px: {cut}"
    over = {r["id"]: round(r["overlap"]) for r in rows if r["overlap"] > 1}
    assert not over, f"label, title, caption and plot overlap (px) at {width} px: {over}"
