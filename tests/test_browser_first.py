"""In a real browser: the first screen at a phone (390×844), a projector at 150% zoom
(853×480, device scale 1.5) and a projector (1280×720). The app opens on Start here with the
real model already answering (within 3 s of page load, the model loaded), the "first token" and
"each next token" cards at least 28 px and on screen without scrolling; no block label covers
the tab bar (what a tap on each tab reaches, by element boxes). The first screen is one view:
its title, live picture (at most 400 px tall, no SVG text under 12 px as rendered), legend,
answer (saying why it stopped), race button and, after "Now without the cache", the race's
lanes (side by side where they fit) and its ratio card, all between the tab bar and the
viewport's bottom. Conditions are polled (Playwright's waits), never slept.
"""
from __future__ import annotations

import re
import time

import pytest

from e2e_browser import (
    SCREENSHOTS,
    ConsoleWatch,
    assert_clean,
    busy,
    number,
    screenshot,
    settled_value,
    text_of,
    wait_until,
)
from inference.config import LIMITS

SIZES = [(390, 844), (853, 480), (1280, 720)]
ANSWERING = """() => { const v = document.querySelector('#start-cards .lab-big-value');
                       return v && /\\d+ ms/.test(v.innerText); }"""


def card_boxes(page) -> list[dict]:
    """Each live card's value: its text, font size (px) and whether it lies inside the viewport."""
    return page.evaluate(
        """() => Array.from(document.querySelectorAll('#start-cards .lab-big-value')).map(v => {
             const r = v.getBoundingClientRect();
             return {text: v.innerText, px: parseFloat(getComputedStyle(v).fontSize),
                     inside: r.top >= 0 && r.bottom <= window.innerHeight && r.width > 0}; })""")


def tabs_covered(page) -> list[str]:
    """Tab buttons whose centre is covered by something outside the tab bar (a block label).
    On a phone the strip scrolls sideways: a tab scrolled out of it is a swipe away, not
    covered, and is not counted."""
    return page.evaluate(
        """() => { const bar = document.querySelector('#lesson-tabs > .tab-wrapper');
                   const strip = bar.querySelector('.tab-container').getBoundingClientRect();
                   return Array.from(bar.querySelectorAll('button[role=tab]')).filter(b => {
                     const r = b.getBoundingClientRect();
                     const x = r.left + r.width / 2;
                     if (!r.width || x < strip.left || x > strip.right) return false;
                     const hit = document.elementFromPoint(r.left + r.width / 2,
                                                           r.top + r.height / 2);
                     return hit && !bar.contains(hit); }).map(b => b.innerText.trim()); }""")


def test_first_screen_answers_at_once_at_every_size(server, browser):
    for width, height in SIZES:
        page = browser.new_page()
        page.set_viewport_size({"width": width, "height": height})
        watch = ConsoleWatch(page)
        try:
            page.goto(server.url, wait_until="load")
            page.locator("#lesson-tabs").wait_for(timeout=60_000)  # the page is on screen
            shown = time.monotonic()
            # within 3 s of that: the prefill beat has been measured and drawn
            page.wait_for_function(ANSWERING, timeout=60_000)
            answered = time.monotonic() - shown
            # The page's own part (load event, queue, stream back) is what must stay under 3 s;
            # the model's measured time to first token is on the card: on a quiet 2-core CI
            # machine a few hundred ms, on a machine busy with other work seconds (the card
            # says which, measured).
            ttft = number(r"first token\s*([\d,]+) ms", text_of(page, "start-cards")) / 1000
            assert answered - ttft <= 3.0, (f"first token shown {answered:.1f} s after the page "
                                            f"at {width}×{height}, the model's TTFT {ttft:.1f} s")
            assert "Start here" in page.get_by_role("tab", selected=True).inner_text()
            assert page.locator("#start-diagram .fs-picture").count() == 1
            page.wait_for_function(
                """() => Array.from(document.querySelectorAll('#start-cards .lab-big-value'))
                     .every(v => /\\d+ ms/.test(v.innerText))""", timeout=60_000)
            cards = card_boxes(page)
            assert len(cards) == 2 and all(c["px"] >= 28 for c in cards), cards
            assert all(c["inside"] for c in cards), (width, height, cards)
            assert "decode" in page.locator("#start-diagram .fs-picture").get_attribute(
                "data-kind")
            screenshot(page, f"first-screen-{width}x{height}")
            page.evaluate("window.scrollBy(0, 600)")  # labels now pass under the sticky bar
            assert page.evaluate("window.scrollY") > 0
            assert tabs_covered(page) == [], (width, height)
            assert_clean(page, watch)
        finally:
            page.close()


# Each part of the first screen, by its box: inside the first viewport, under the tab bar?
FIRST_VIEW = ["#start-title", "#start-diagram .fs-picture", "#start-diagram .fs-legend",
              "#start-answer", "#start-race"]
BOXES = """sels => {
  const bar = document.querySelector('#lesson-tabs > .tab-wrapper').getBoundingClientRect();
  const out = {};
  sels.forEach(s => { const e = document.querySelector(s); const r = e && e.getBoundingClientRect();
    out[s] = r ? {top: Math.round(r.top), bottom: Math.round(r.bottom), left: Math.round(r.left),
                  height: Math.round(r.height),
                  inside: r.height > 0 && r.top >= bar.bottom - 1 && r.bottom <= innerHeight + 1}
               : null; });
  return out; }"""
# The rendered size (CSS px) of every SVG text drawn in the live picture: its font size times
# the SVG's scale on screen (a viewBox shown smaller than its units shrinks its text).
SVG_TEXT_PX = """() => Array.from(document.querySelectorAll('#start-diagram svg text'))
  .filter(t => { const r = t.getBoundingClientRect(); return r.width > 0 && r.height > 0; })
  .map(t => { const m = t.getScreenCTM();
              return parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b); })"""
ANSWERED = """() => /stopped after|ended by the model|ended after/.test(
  (document.querySelector('#start-answer') || {}).innerText)"""
RACED = """() => /machine quiet|numbers are noisy|Not a possible result/.test(
  (document.querySelector('#start-race-result') || {}).innerText)"""


def open_at(browser, width: int, height: int, scale: float):
    """A new page at this viewport and device scale (a persistent context sets no scale per
    page: Chromium's device metrics do, as a 150% zoom on a 1280×720 projector shows it)."""
    page = browser.new_page()
    page.set_viewport_size({"width": width, "height": height})
    browser.new_cdp_session(page).send("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height, "deviceScaleFactor": scale, "mobile": False})
    return page


def view_screenshot(page, name: str) -> None:
    """What the first viewport shows (not the whole page), in test-artifacts/screenshots/."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


# How many of its text's lines the answer box holds (its height ÷ a line's)
ANSWER_LINES = """() => {
  const box = document.querySelector('#start-answer');
  const text = box.querySelector('p') || box;
  return box.clientHeight / parseFloat(getComputedStyle(text).lineHeight);
}"""


@pytest.mark.parametrize("size", [(1280, 720, 1), (853, 480, 1.5), (390, 844, 1)],
                         ids=["projector", "projector-150", "phone"])
def test_the_first_screen_is_one_view_with_its_race(server, browser, size):
    width, height, scale = size
    page = open_at(browser, width, height, scale)
    watch = ConsoleWatch(page)
    try:
        page.goto(server.url, wait_until="load")
        assert page.evaluate("devicePixelRatio") == scale
        page.wait_for_function(ANSWERED, timeout=120_000)
        answer = text_of(page, "start-answer")
        assert re.search(rf"stopped after {LIMITS.live_new_tokens} tokens: the first screen's "
                         r"answer length|ended by the model after \d+ tokens", answer), answer
        boxes = page.evaluate(BOXES, FIRST_VIEW + ["#start-cards"])
        outside = {k: b for k, b in boxes.items() if not (b and b["inside"])}
        assert not outside, (width, height, outside)
        assert boxes["#start-diagram .fs-picture"]["height"] <= 400, boxes
        title = text_of(page, "start-title")
        assert "LLM inference" in title and "one token per step" in title
        step = page.locator("#start-diagram .fs-step").inner_text()
        assert re.fullmatch(r"step \d+: the model read \d+ earlier tokens from its cache and "
                            r"wrote one more in [\d,]+ ms.*", step), step
        px = page.evaluate(SVG_TEXT_PX)
        assert px and min(px) >= 12, (width, sorted(px)[:3])
        view_screenshot(page, f"first-screen-one-view-{width}x{height}")
        lines = page.evaluate(ANSWER_LINES)  # the scrolling answer shows no half-cut line
        assert lines >= 2.9 and abs(lines - round(lines)) < 0.1, (width, lines)

        # a prompt of its own per size: a race another size just ran would be shared, with
        # its "measured s ago for another visitor" line above the ratio
        page.locator("#start-prompt textarea").fill(f"Why is the sky blue? ({width} px)")
        page.locator("#start-race").click()
        page.wait_for_function(RACED, timeout=300_000)
        result = text_of(page, "start-race-result")
        assert "time without ÷ with the cache" in result
        # typing in the prompt scrolled down to it, and the click scrolled the button back
        # into view by whatever Playwright chose: the first view is the page's top
        page.evaluate("window.scrollTo({top: 0, behavior: 'instant'})")
        boxes = page.evaluate(BOXES, FIRST_VIEW + ["#start-race-result .lab-big"])
        view_screenshot(page, f"first-screen-race-{width}x{height}")  # also when it fails
        outside = {k: b for k, b in boxes.items() if not (b and b["inside"])}
        assert not outside, (width, height, outside)
        lanes = page.evaluate(BOXES, ["#start-diagram .fs-lane:nth-child(1)",
                                      "#start-diagram .fs-lane:nth-child(2)"])
        first, second = lanes.values()
        assert "without a cache" in text_of(page, "start-diagram")
        # side by side where two lanes fit the picture's width at 12 px text (here 1280 and
        # 853), one above the other on a phone
        assert (first["top"] == second["top"]) == (width >= 853), lanes
        px = page.evaluate(SVG_TEXT_PX)
        assert px and min(px) >= 12, (width, sorted(px)[:3])
        view_screenshot(page, f"first-screen-race-{width}x{height}")
        assert_clean(page, watch)
    finally:
        page.close()


LANDED = """() => {
  const bar = document.querySelector('#lesson-tabs > .tab-wrapper').getBoundingClientRect();
  const panel = Array.from(document.querySelectorAll('#lesson-tabs [role=tabpanel]'))
    .find(p => p.getBoundingClientRect().height > 0);
  if (!panel) return false;
  const first = panel.querySelector('.prose') || panel;
  const top = first.getBoundingClientRect().top;
  return top >= bar.bottom - 2 && top < window.innerHeight / 2;
}"""


# The lesson's start just under the sticky tab bar: its panel's top edge (every lesson's panel
# starts with its own content, a title or Try it's prompt box).
PANEL_LANDED = """() => {
  const bar = document.querySelector('#lesson-tabs > .tab-wrapper').getBoundingClientRect();
  const panel = Array.from(document.querySelectorAll('#lesson-tabs > [role=tabpanel]'))
    .find(p => p.getBoundingClientRect().height > 0);
  if (!panel) return false;
  const top = panel.getBoundingClientRect().top;
  return top >= bar.bottom - 40 && top <= bar.bottom + 40;
}"""


@pytest.mark.parametrize("size", [(1280, 720), (390, 844)], ids=["projector", "phone"])
def test_next_lesson_lands_on_the_lessons_title(visitor, size):
    """Every lesson's "Next lesson" button, pressed at the bottom of its lesson, opens the
    next one with its start in view (just under the tab bar), on a projector and a phone."""
    from lessons import BY_ID, TABS

    page, watch = visitor
    page.set_viewport_size({"width": size[0], "height": size[1]})
    walked = []
    for tab in TABS:
        if not tab.words or tab.next is None:
            continue  # no footer, or the last lesson
        page.get_by_role("tab", name=tab.label, exact=True).click()
        page.get_by_role("tab", name=tab.label, selected=True).wait_for()
        button = page.locator(f"#next-{tab.id}")
        button.scroll_into_view_if_needed()
        # the footer is below the title: scrolled well past the landing check's ±40 px
        assert page.evaluate("window.scrollY") > 100, tab.id
        button.click()
        page.get_by_role("tab", name=BY_ID[tab.next].label, selected=True).wait_for()
        try:
            page.wait_for_function(PANEL_LANDED, timeout=5_000)
        except Exception as exc:
            raise AssertionError(f"Next from {tab.id} did not land on {tab.next}'s start "
                                 f"at {size}; landed before: {walked}") from exc
        walked.append(tab.next)
    assert len(walked) >= 8, walked
    assert_clean(page, watch)


TOP_TABS = "#lesson-tabs > .tab-wrapper button[role=tab]"
SUB_TABS = """() => {
  const top = Array.from(document.querySelectorAll('#lesson-tabs > [role=tabpanel]'))
    .find(p => p.getBoundingClientRect().height > 0);
  return top ? Array.from(top.querySelectorAll('button[role=tab]'))
    .map(b => b.innerText.trim()) : []; }"""
# Charts on screen now: those still a bare icon (Gradio's "Empty value" box), and those drawn
# with neither a title nor an annotation (nothing says what they are or what fills them).
CHARTS = """() => { const shown = e => e.getBoundingClientRect().height > 0;
  const where = e => (e.closest('.block[id]') || {}).id || '?';
  const drawn = Array.from(document.querySelectorAll('.js-plotly-plot')).filter(shown);
  return {drawn: drawn.map(where),
          bare: Array.from(document.querySelectorAll('[aria-label="Empty value"]'))
                  .filter(shown).map(where),
          untitled: drawn.filter(g => { const l = g.layout || {};
                      const t = l.title ? (l.title.text || String(l.title)) : '';
                      return !t && !(l.annotations && l.annotations.length); }).map(where)}; }"""
# Scroll the first block label below the tab bar up under it, then report (by element boxes)
# each label whose box meets the bar's box where the bar is not the thing painted on top.
# Labels: blocks' badges and fields' labels (a chart's badge is hidden: its title names it).
LABELS_UNDER_BAR = """() => {
  const bar = document.querySelector('#lesson-tabs > .tab-wrapper');
  const labels = () => Array.from(document.querySelectorAll(
      '[data-testid=block-label], [data-testid=block-info]'))
    .filter(l => l.getBoundingClientRect().height > 0);
  let b = bar.getBoundingClientRect();
  const below = labels().find(l => l.getBoundingClientRect().top > b.bottom);
  if (below) window.scrollBy(0, below.getBoundingClientRect().top - b.top - 1);
  b = bar.getBoundingClientRect();
  let met = 0; const bad = [];
  labels().forEach(l => { const r = l.getBoundingClientRect();
    const top = Math.max(r.top, b.top), bottom = Math.min(r.bottom, b.bottom);
    const left = Math.max(r.left, b.left), right = Math.min(r.right, b.right);
    if (top >= bottom || left >= right) return;
    met += 1;
    const hit = document.elementFromPoint((left + right) / 2, (top + bottom) / 2);
    if (!hit || !bar.contains(hit)) bad.push(l.innerText.trim()); });
  return {met, bad}; }"""


# WCAG contrast of each visible block label, label text and slider end against the first
# opaque background behind it; those under 4.5:1.
LOW_CONTRAST = """() => {
  const rgb = c => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map(v => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
    .reduce((s, v, i) => s + v * [0.2126, 0.7152, 0.0722][i], 0);
  const behind = e => { for (; e; e = e.parentElement) { const c = rgb(getComputedStyle(e)
      .backgroundColor); if (c.length === 3 || (c.length === 4 && c[3] > 0.9)) return c; }
    return [255, 255, 255]; };
  return Array.from(document.querySelectorAll(
      '[data-testid=block-label], [data-testid=block-info], [data-testid=min-value], ' +
      '[data-testid=max-value]')).filter(e => e.getBoundingClientRect().height > 0)
    .map(e => { const a = lum(rgb(getComputedStyle(e).color)), b = lum(behind(e));
      return [e.innerText.trim().slice(0, 30),
              (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)]; })
    .filter(([, ratio]) => ratio < 4.5); }"""


def walk(page):
    """Open every lesson tab and every sub-tab in it, in order; yield each screen's name."""
    for top in page.locator(TOP_TABS).all_inner_texts():
        top = top.strip()
        page.evaluate("window.scrollTo(0, 0)")
        page.locator("#lesson-tabs > .tab-wrapper").get_by_role("tab", name=top,
                                                                exact=True).click()
        yield top
        if top == "Present":  # presenting hides the tab strip; Esc brings it back
            page.keyboard.press("Escape")
        for sub in page.evaluate(SUB_TABS):
            page.evaluate("window.scrollTo(0, 0)")
            page.get_by_role("tab", name=sub, exact=True).click()
            yield f"{top} › {sub}"


def test_every_chart_says_what_fills_it_and_no_label_covers_the_tabs(visitor):
    """At load: walking every tab and sub-tab at a phone and a projector, no chart is
    a bare icon (each has a title or an annotation saying which button fills it); with a
    block label scrolled under the sticky tab bar, the bar is what is painted there; and block
    labels and slider ends are at least 4.5:1 against their background."""
    page, watch = visitor
    # Let the first screen's live answer end first: a tab click cancels it, and Gradio answers
    # a cancel that races the answer's own end with an error (its event id already gone).
    wait_until(lambda: page.evaluate(ANSWERING) and not busy(page, "start-cards"), 120,
               "the first screen's live answer to end")
    for width, height in [(390, 844), (1280, 720)]:
        page.set_viewport_size({"width": width, "height": height})
        drawn, met = set(), 0
        for screen in walk(page):
            charts = settled_value(lambda: page.evaluate(CHARTS),
                                   lambda c: not c["bare"] and not c["untitled"], timeout_s=5)
            assert charts["bare"] == [] and charts["untitled"] == [], (width, screen, charts)
            drawn |= set(charts["drawn"])
            under = page.evaluate(LABELS_UNDER_BAR)
            assert under["bad"] == [], (width, screen, under)
            met += under["met"]
            assert tabs_covered(page) == [], (width, screen)
            assert page.evaluate(LOW_CONTRAST) == [], (width, screen)
        # the walk saw the lessons' charts (every one of these started as a bare icon), and
        # labels did pass under the bar, so the two checks above had something to check
        assert {"decode-candidates", "decode-timing", "kv-growth-grid", "kv-growth-bytes",
                "kv-race-plot", "kv-prefix-plot", "kv-attn-plot"} <= drawn, drawn
        assert len(drawn) >= 25 and met >= 10, (len(drawn), met)
    assert_clean(page, watch)
