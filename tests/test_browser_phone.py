"""A phone following the class (390×844), in a real browser: the sticky tab bar is one strip
that scrolls sideways (at most 2 rows, ≤ 100 px: wrapped, the 14 tabs took 5 rows and 172 px),
the open tab is scrolled into it when a button (not a tap on the strip) opens a lesson far
along, and checkboxes, a slider's number box and accordion headers are at least 24 px tall.

The app's own tabs (lessons.TABS), CSS and tab listener (assets/lesson_scroll.js) in a small
Blocks holding a checkbox, a slider and an accordion, so the test takes seconds instead of the
minute the real app needs to load its model. Screenshot: test-artifacts/screenshots/.
"""
from __future__ import annotations

import socket

import pytest

from e2e_browser import screenshot, wait_until

BAR = """() => { const w = document.querySelector('#lesson-tabs > .tab-wrapper');
  const tabs = Array.from(w.querySelectorAll('button[role=tab]')).filter(t => t.offsetParent);
  const strip = w.querySelector('.tab-container').getBoundingClientRect();
  const open = w.querySelector('button[role=tab][aria-selected=true]').getBoundingClientRect();
  return {height: w.getBoundingClientRect().height, count: tabs.length,
          rows: new Set(tabs.map(t => Math.round(t.getBoundingClientRect().top))).size,
          openInView: open.left >= strip.left - 1 && open.right <= strip.right + 1}; }"""
TARGETS = """() => Object.fromEntries([['checkbox', 'input[type=checkbox]'],
    ['number box', 'input[type=number]'], ['accordion header', 'button.label-wrap']]
  .map(([name, sel]) => [name, Math.min(...Array.from(document.querySelectorAll(sel))
    .filter(e => e.offsetParent).map(e => e.getBoundingClientRect().height))]))"""


@pytest.fixture(scope="module")
def phone_page():
    """The app's tabs, CSS and tab listener around a few small controls; its URL."""
    import gradio as gr

    from lessons import TABS
    from lessons.common.lesson_text import lesson_text, page_script

    with gr.Blocks() as demo:
        with gr.Tabs(elem_id="lesson-tabs", overflow_behavior="wrap") as tabs:
            for tab in TABS:
                with gr.Tab(tab.label, id=tab.id):
                    gr.Markdown(f"## {tab.label}")
                    gr.Checkbox(label="a choice")
                    gr.Slider(0, 10, label="a slider")
                    with gr.Accordion("Read more", open=False):
                        gr.Markdown("more")
                    gr.Button("Open the last tab", elem_id=f"last-{tab.id}").click(
                        lambda: gr.Tabs(selected=TABS[-1].id), None, tabs, queue=False)
        page_script(demo, "lesson_scroll.js")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                css=lesson_text("style.css"),
                theme=gr.themes.Soft(font=["system-ui", "sans-serif"]))
    yield f"http://127.0.0.1:{port}", TABS
    demo.close()


def test_phone_tab_bar_is_one_strip_with_the_open_tab_in_view(browser, phone_page):
    url, tabs = phone_page
    page = browser.new_page()
    page.set_viewport_size({"width": 390, "height": 844})
    try:
        page.goto(url)
        page.wait_for_selector("#lesson-tabs")
        bar = page.evaluate(BAR)
        assert bar["count"] == len(tabs) and bar["rows"] <= 2 and bar["height"] <= 100, bar
        page.locator(f"#last-{tabs[0].id}").click()
        last = page.get_by_role("tab", name=tabs[-1].label, exact=True)
        wait_until(lambda: last.get_attribute("aria-selected") == "true", 10, "the last tab open")
        wait_until(lambda: page.evaluate(BAR)["openInView"], 10, "the last tab in the strip")
        targets = page.evaluate(TARGETS)
        screenshot(page, "phone-tabs-and-targets")
    finally:
        page.close()
    small = {name: h for name, h in targets.items() if h < 24}
    assert not small, f"tap targets under 24 px at 390×844: {small}"
