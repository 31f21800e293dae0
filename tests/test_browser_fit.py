"""In a real browser: every result next to its button. For every lesson, at a
projector (1280×720) and a phone (390×844), the lesson's main button, its headline cards and
its first chart lie in that order with nothing tall between them, and together they are no
taller than the screen below the sticky tab bar: scrolled to the button, the class sees the
result. Measured by element boxes (`getBoundingClientRect`), never by screenshots.

Each lesson is checked as it opens (empty states count: a chart before its run has its
placeholder's size), and lessons 4, 5 and 6 again after their smallest runs, where a run used
to put content between the button and the chart (lesson 5's memory plan, ~200 px; lesson 4's
cache formula) or grows the chart (lesson 6's roofline gains a legend row per mode).
"""
from __future__ import annotations

import pytest

from e2e_browser import (
    assert_clean,
    choose_option,
    open_tab,
    set_slider,
    settled_value,
    text_of,
    wait_settled,
    wait_until,
)
from inference.config import LIMITS

SIZES = [(1280, 720), (390, 844)]
MAX_GAP = 72  # px between two items in the chain: Gradio's 16-px gaps and an empty block or two

# (tab, sub-tab (None: the one it opens on), main button, its headline cards, its first chart),
# as CSS selectors, in the order they must appear. Lesson 1 has no button: its text box is the
# control, answered as you type. Lesson 2's "Prefill it" draws the mechanism diagram, ~720 px
# tall at 1280 px wide (an SVG as wide as the page), so its head, the measured sentence, is the
# part asked to share the screen; its sweep has a chart of its own. Lessons 5 and 6 show a
# progress line, then their headline cards (an empty state naming the button before a run).
LESSONS = [
    ("Try it", None, "#chat-generate", ("#chat-stats",), "#chat-box"),
    ("1 · Tokens", None, "#tok-text", ("#tok-counts",), "#tok-view"),
    ("2 · Prefill", None, "#prefill-run", ("#prefill-result",), "#prefill-diagram .mech-head"),
    ("2 · Prefill", None, "#prefill-sweep", ("#prefill-progress",), "#prefill-chart"),
    ("3 · Decode", None, "#decode-step", ("#decode-stats",), "#decode-candidates"),
    ("3b · Speculative", None, "#spec-race", ("#spec-progress", "#spec-cards"),
     "#spec-passes-box"),
    ("4 · KV cache", None, "#kv-growth-btn", ("#kv-growth-text",), "#kv-growth-grid"),
    ("4 · KV cache", "2 · Race: cache on vs off", "#kv-race-btn",
     ("#kv-race-progress", "#kv-race-summary"), "#kv-race-plot"),
    ("4b · KV pages", None, "#pages-add", ("#pages-story",), "#pages-grid"),
    ("4c · Long contexts", None, "#ctx-prefill-btn", ("#ctx-prefill-progress",),
     "#ctx-prefill-chart"),
    ("5 · Batching", None, "#batch-sweep-btn", ("#batch-sweep-progress", "#batch-cards"),
     "#batch-sweep-throughput"),
    ("6 · Quantization", None, "#quant-run", ("#quant-progress", "#quant-cards"),
     "#quant-roofline"),
    ("This machine", None, "#perf-run", ("#perf-result",), "#perf-chart"),
]

# The chain's boxes (px from the viewport's top): each item's top and bottom, and where its
# block starts (`start`: "#prefill-diagram .mech-head" is the head, its block the diagram);
# for the button, also where its controls end (`end`): its row (the prompt beside it, Stop)
# and any rows of buttons only right under it (Play, Reset: controls, not content between the
# button and its result).
CHAIN = """sels => {
  const box = e => { const r = e.getBoundingClientRect(); return [r.top, r.bottom]; };
  const onlyButtons = r => r.children.length > 0
    && Array.from(r.children).every(c => c.tagName === 'BUTTON');
  const controlsEnd = b => {
    const row = b.parentElement;
    if (!row.classList.contains('row')) return box(b)[1];
    let end = box(row)[1];
    for (let r = row.nextElementSibling; r; r = r.nextElementSibling) {
      if (r.getBoundingClientRect().height === 0) continue;  // a hidden block
      if (!onlyButtons(r)) break;
      end = Math.max(end, box(r)[1]);
    }
    return end; };
  const bar = document.querySelector('#lesson-tabs > .tab-wrapper').getBoundingClientRect();
  const items = sels.map(s => { const e = document.querySelector(s);
    const block = document.querySelector(s.split(' ')[0]);
    return e ? {sel: s, top: box(e)[0], bottom: box(e)[1], start: box(block)[0]}
             : {sel: s, top: null}; });
  const b = document.querySelector(sels[0]);
  if (b) items[0].end = controlsEnd(b);
  return {bar: bar.height, height: window.innerHeight, items}; }"""


def chain(page, selectors: list[str]) -> dict:
    """The chain's boxes once the layout has settled: the same boxes twice in a row."""
    seen = []

    def steady() -> bool:
        seen.append(page.evaluate(CHAIN, selectors))
        return (len(seen) > 1 and seen[-1] == seen[-2]
                and all(i["top"] is not None for i in seen[-1]["items"]))

    settled_value(steady, bool, timeout_s=10)
    return seen[-1]


def fit_problems(m: dict) -> list[str]:
    """What breaks "the button, its cards and its first chart on one screen": an item missing
    or not drawn, items out of order, something tall between two of them, or the whole chain
    taller than the screen below the tab bar."""
    items = m["items"]
    missing = [i["sel"] for i in items if i["top"] is None]
    if missing:
        return [f"not on the page: {missing}"]
    button, chart = items[0], items[-1]
    problems = [f"{i['sel']} is not drawn" for i in (button, chart) if i["bottom"] <= i["top"]]
    shown = [i for i in items if i["bottom"] > i["top"]]  # an empty Markdown has no height
    for before, after in zip(shown, shown[1:]):
        end = before.get("end", before["bottom"])
        if after["start"] < before["bottom"] - 1:
            problems.append(f"{after['sel']} starts above the end of {before['sel']}")
        elif after["start"] - end > MAX_GAP:
            problems.append(f"{after['start'] - end:.0f} px between {before['sel']} and "
                            f"{after['sel']}")
    union = max(i["bottom"] for i in shown) - min(i["top"] for i in shown)
    room = m["height"] - m["bar"]
    if union > room:
        problems.append(f"button to chart {union:.0f} px tall, {room:.0f} px under the tab bar")
    return problems


def heights(m: dict) -> str:
    """The measured boxes, for a failure message: each item's top and height, the union."""
    shown = [i for i in m["items"] if i["top"] is not None]
    top = min(i["top"] for i in shown)
    parts = [f"{i['sel']} +{i['top'] - top:.0f} ({i['bottom'] - i['top']:.0f} px)"
             for i in shown]
    union = max(i["bottom"] for i in shown) - top
    return (f"union {union:.0f} px of {m['height'] - m['bar']:.0f} "
            f"(viewport {m['height']}, tab bar {m['bar']:.0f}): " + ", ".join(parts))


def assert_fits(page, lesson: str, size: tuple[int, int], selectors: list[str],
                when: str = "as it opens") -> dict:
    m = chain(page, selectors)
    problems = fit_problems(m)
    assert not problems, (f"{lesson} at {size[0]}×{size[1]} {when}: {'; '.join(problems)}. "
                          f"{heights(m)}")
    return m

# On a phone (style.css, max-width 640 px) Decode's answer tokens come right after Step, before
# its cards: the chain there includes them.
PHONE_FIRST = {"#decode-step": "#decode-output"}


def open_lesson(page, tab: str, sub: str | None) -> None:
    open_tab(page, tab)
    page.get_by_role("tab", name=tab, selected=True).wait_for()
    if sub is not None:
        page.get_by_role("tab", name=sub, exact=True).click()
        page.get_by_role("tab", name=sub, selected=True).wait_for()


@pytest.mark.parametrize("tab, sub, button, cards, chart", LESSONS,
                         ids=[row[2].lstrip("#") for row in LESSONS])
def test_button_cards_and_first_chart_share_one_screen(visitor, tab, sub, button, cards, chart):
    """Opened at the first size, then the window resized to each (one page per lesson)."""
    page, watch = visitor
    page.set_viewport_size({"width": SIZES[0][0], "height": SIZES[0][1]})
    open_lesson(page, tab, sub)
    for size in SIZES:
        page.set_viewport_size({"width": size[0], "height": size[1]})
        first = [PHONE_FIRST[button]] if size[0] <= 640 and button in PHONE_FIRST else []
        assert_fits(page, tab, size, [button, *first, *cards, chart])
    assert_clean(page, watch)


def check_both_sizes(page, lesson: str, selectors: list[str], when: str,
                     below: str | None = None) -> None:
    """`assert_fits` at each size; `below`: what the run shows under the first chart."""
    for size in SIZES:
        page.set_viewport_size({"width": size[0], "height": size[1]})
        assert_fits(page, lesson, size, selectors, when)
        if below is not None:
            chart = page.locator(selectors[-1]).bounding_box()
            under = page.locator(below).bounding_box()
            assert under["y"] >= chart["y"] + chart["height"] - 1, (lesson, size, below,
                                                                    under, chart)


def test_lesson_5_plan_stays_under_the_chart_after_a_sweep(visitor):
    """The walk's failure: after a sweep the memory plan (~200 px) sat between Run sweep and
    its throughput chart at 1280×720. The smallest sweep (batch 1 and 2) plans two rows; its
    headline cards (three, and the busy notice on a busy run) sit between them."""
    page, watch = visitor
    page.set_viewport_size({"width": 1280, "height": 720})
    open_tab(page, "5 · Batching")
    choose_option(page, "batch-sweep-max", "2")
    set_slider(page, "batch-sweep-btn", "Timed decode steps per batch size",
               LIMITS.sweep_decode_steps.low)
    page.locator("#batch-sweep-btn").click()
    wait_until(lambda: "✅" in text_of(page, "batch-sweep-progress"), 180, "the sweep to finish")
    wait_until(lambda: "Memory plan" in text_of(page, "batch-sweep-plan"), 10, "the plan")
    wait_until(lambda: "tok/s" in text_of(page, "batch-cards"), 10, "the headline cards")
    check_both_sizes(page, "5 · Batching", ["#batch-sweep-btn", "#batch-sweep-progress",
                                            "#batch-cards", "#batch-sweep-throughput"],
                     "after a sweep",
                     below="#batch-sweep-plan")
    assert_clean(page, watch)


def test_lesson_6_roofline_fits_with_its_legend_after_a_comparison(visitor):
    """The walk's failure: after a comparison the roofline (a legend row per mode) ended past
    720 px. Float32 and int8, the fewest greedy tokens; the headline cards (four, and the busy
    notice on a busy run) between the progress line and the roofline."""
    page, watch = visitor
    page.set_viewport_size({"width": 1280, "height": 720})
    open_tab(page, "6 · Quantization")
    modes = page.locator("#quant-modes")
    for label in ["float16", "bfloat16", "int4 weight-only (groups of 32)"]:
        modes.get_by_label(label, exact=True).uncheck()
    modes.get_by_label("int8 weight-only (per-channel scales)", exact=True).check()
    set_slider(page, "quant-run", "Greedy tokens to compare", int(LIMITS.quant_new_tokens.low))
    page.locator("#quant-run").click()
    wait_until(lambda: "✅" in text_of(page, "quant-progress"), 300,
               "float32 and int8 to be built and measured")
    wait_until(lambda: "decode ÷ fp32" in text_of(page, "quant-cards"), 10, "the headline cards")
    check_both_sizes(page, "6 · Quantization", ["#quant-run", "#quant-progress",
                                                "#quant-cards", "#quant-roofline"],
                     "after a comparison")
    assert_clean(page, watch)


def test_lesson_4_formula_stays_under_the_grid_after_a_run(visitor):
    """Lesson 4's first run: the step's line above the cache grid, the formula under it."""
    page, watch = visitor
    page.set_viewport_size({"width": 1280, "height": 720})
    open_tab(page, "4 · KV cache")
    set_slider(page, "kv-growth-btn", "New tokens", int(LIMITS.growth_new_tokens.low))
    page.locator("#kv-growth-btn").click()
    wait_until(lambda: "equal" in text_of(page, "kv-formula"), 120, "the cache to be counted")
    wait_settled(page, "kv-growth-text", timeout_s=120)  # the run's last step shown
    check_both_sizes(page, "4 · KV cache", ["#kv-growth-btn", "#kv-growth-text",
                                            "#kv-growth-grid"], "after a run",
                     below="#kv-formula")
    assert_clean(page, watch)
