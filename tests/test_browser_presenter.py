"""In a real browser: presenter mode walked with the keyboard (moves landing in order),
measurements run from its screens, a prediction entered and compared (and remembered across a
reload), and every screen's payoff fitting a projector at 150%."""
from __future__ import annotations

import base64
import time

from e2e_browser import (
    SCREENSHOTS,
    app_base,
    assert_clean_after_navigation,
    goto,
    judged_busy,
    record_changes,
    recorded_changes,
    settled_value,
    text_of,
    wait_until,
)
from lessons.common.predictions import load_screens

SCREENS = load_screens()
TOTAL = len(SCREENS)


def _screen(page) -> int:
    text = text_of(page, "present-screen")
    return int(text.split("Screen ", 1)[1].split(" of")[0]) if "Screen " in text else 0



def _press(page, key: str, expect: int) -> None:
    page.keyboard.press(key)
    try:
        wait_until(lambda: _screen(page) == expect, 30, f"screen {expect} after {key}")
    except AssertionError as exc:
        shown = [int(t.split("Screen ", 1)[1].split(" of")[0]) if "Screen " in t else 0
                 for t in recorded_changes(page, "present-screen")]
        raise AssertionError(f"{exc} (it shows screen {_screen(page)}; screens shown "
                             f"since the page opened: {shown})") from None


def _index(key: str) -> int:
    return next(i for i, s in enumerate(SCREENS) if s.measure == key)


def _walk_to(page, index: int) -> None:
    while _screen(page) - 1 < index:
        _press(page, "ArrowRight", _screen(page) + 1)


def test_presenter_walks_measures_and_remembers(visitor, server):
    page, watch = visitor
    goto(page, f"{app_base(server)}?present=1")
    wait_until(lambda: _screen(page) == 1, 30, "the presenter's first screen")
    record_changes(page, "present-screen")  # for the message when a press does not land
    assert page.locator("#present-screen").is_visible()
    page.locator("#present-machine").click()  # focus on the page, not in a field

    # Every screen forward with the arrow key, then every one back; the machine line on each.
    for n in range(2, TOTAL + 1):
        _press(page, "ArrowRight", n)
        assert SCREENS[n - 1].title in text_of(page, "present-screen")
        assert "Measured live on" in text_of(page, "present-machine")
    page.keyboard.press("ArrowRight")  # past the end: stays, and Back at once goes back one
    for n in range(TOTAL - 1, 0, -1):
        _press(page, "ArrowLeft", n)
    assert page.locator("#present-guess").is_hidden()  # screen 1 asks for no guess
    # Two presses faster than a move's round trip: both count (Gradio's default dropped the
    # second while the first was on its way: a lost press on a busy machine).
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    wait_until(lambda: _screen(page) == 3, 30, "screen 3 after two quick presses")
    _press(page, "ArrowLeft", 2)
    _press(page, "ArrowLeft", 1)

    # Screen 2's measurement: the token count, big.
    _press(page, "ArrowRight", 2)
    page.locator("#present-run").click()
    wait_until(lambda: "tokens for" in text_of(page, "present-result"), 60, "the token count")

    # Predict, then measure: int8 against float32 (the cheapest of the predicted screens).
    _walk_to(page, _index("int8"))
    guess = page.locator("#present-guess input")
    assert guess.is_visible()
    guess.fill("2")
    page.locator("#present-run").click()
    wait_until(lambda: "decode speed of float32" in text_of(page, "present-result"), 300,
               "the int8 race result")
    compare = wait_until(lambda: (t := text_of(page, "present-compare")) and "measured:" in t
                         and t, 10, "guess against measurement")
    assert "Your guess: 2 × faster" in compare
    # a quiet run says why; a busy one (the browser shares the cores) sets no verdict
    busy_run = judged_busy(compare + text_of(page, "present-result"))
    assert ("Why:" in compare) != busy_run, compare

    # Typing in the guess box does not turn the page (arrow keys move the caret there).
    guess.press("ArrowLeft")
    assert _screen(page) == _index("int8") + 1

    # Remembered in this browser: reload, and the presenter is where it was, result and all.
    goto(page, f"{app_base(server)}?present=1")
    wait_until(lambda: _screen(page) == _index("int8") + 1, 30, "the remembered screen")
    assert "decode speed of float32" in text_of(page, "present-result")
    assert "Your guess: 2 × faster" in text_of(page, "present-compare")
    assert_clean_after_navigation(page, watch)


def _component_id(page, elem_id: str) -> int:
    config = page.evaluate("async () => (await fetch('config')).json()")
    return next(c["id"] for c in config["components"] if c["props"].get("elem_id") == elem_id)


def test_back_pressed_while_next_is_on_its_way_lands_where_it_started(visitor, server):
    """Next's request held in the network, Back pressed meanwhile: a page that sends Back at
    once gets it answered first and then Next's screen drawn over it. Moves wait for the
    answers of the moves before them, so the page ends where it started."""
    page, watch = visitor
    page.evaluate("localStorage.clear()")  # not where an earlier test left the presenter
    goto(page, f"{app_base(server)}?present=1")
    wait_until(lambda: _screen(page) == 1, 30, "the presenter's first screen")
    page.locator("#present-machine").click()  # focus on the page, not in a field
    _press(page, "ArrowRight", 2)
    next_id, back_id = (_component_id(page, f"present-{b}") for b in ("next", "back"))
    held, answered = [], []

    def hold_next(route) -> None:
        if not held and (route.request.post_data_json or {}).get("trigger_id") == next_id:
            held.append(route)  # let go below, once Back had its chance to be answered first
        else:
            route.continue_()

    def on_response(response) -> None:
        if "/gradio_api/run/predict" in response.url:
            trigger = (response.request.post_data_json or {}).get("trigger_id")
            answered.append({next_id: "next", back_id: "back"}.get(trigger))

    page.on("response", on_response)
    moves = "**/gradio_api/run/predict*"  # the page's query string follows
    page.route(moves, hold_next)
    page.keyboard.press("ArrowRight")
    wait_until(lambda: _screen(page) and held, 30, "Next's request, held")
    page.keyboard.press("ArrowLeft")
    # Back answered now would be the bug. A page that orders its moves sends nothing, so
    # this watch can only end at its bound.
    deadline = time.monotonic() + 3
    while "back" not in answered and time.monotonic() < deadline:
        page.wait_for_timeout(100)  # lets Playwright deliver the page's responses
    assert "back" not in answered, "Back was sent before Next's answer came"
    held[0].continue_()
    wait_until(lambda: _screen(page) and answered.count("back") == 1, 30, "both moves answered")
    page.unroute(moves)
    assert answered.index("next") < answered.index("back"), answered
    wait_until(lambda: _screen(page) == 2, 10, "screen 2 after Next then Back")
    assert_clean_after_navigation(page, watch)


PARTS_JS = """() => { const box = s => { const e = document.querySelector(s);
    const r = e && e.getBoundingClientRect(); return r && r.height ? [r.top, r.bottom] : null; };
  return {title: box('#present-screen h2'), run: box('#present-run'),
          result: box('#present-result'), big: box('#present-result .present-big'),
          tabs: box('#lesson-tabs > .tab-wrapper'), height: window.innerHeight}; }"""


def test_presenter_fits_a_projector_at_150_percent(visitor, server):
    """At 853×480 (1280×720 at 150%) every screen shows its title, its button and
    where its number appears without scrolling, the page's chrome hidden; after a run the
    number itself is on screen. Esc brings the tab strip back; the Present tab hides it again."""
    page, watch = visitor
    page.set_viewport_size({"width": 853, "height": 480})
    # No figure remembered from earlier tests' visitors: screen 2's number must be this run's
    # (an earlier figure showing while this run still went on let the walk below race its end).
    page.evaluate("localStorage.clear()")
    goto(page, f"{app_base(server)}?present=1")
    wait_until(lambda: _screen(page) >= 1, 30, "the presenter")
    record_changes(page, "present-screen")
    page.locator("#present-machine").click()  # focus on the page, not in a field
    while _screen(page) > 1:  # earlier tests' visitors left it further on (remembered)
        _press(page, "ArrowLeft", _screen(page) - 1)
    _press(page, "ArrowRight", 2)
    page.locator("#present-run").click()  # screen 2: the token count, quick
    wait_until(lambda: page.evaluate(PARTS_JS)["big"], 60, "screen 2's number")
    parts = page.evaluate(PARTS_JS)
    big = parts["big"][1] - parts["result"][0]  # how far below the result's top it ends
    assert big > 30, parts
    _press(page, "ArrowLeft", 1)
    for n in range(1, TOTAL + 1):
        if n > 1:
            _press(page, "ArrowRight", n)
        parts = settled_value(lambda: page.evaluate(PARTS_JS),
                              lambda p, n=n: p["title"] and SCREENS[n - 1].title in text_of(
                                  page, "present-screen"))
        assert parts["tabs"] is None, f"screen {n}: the tab strip is showing"
        for part in ("title", "run", "result"):
            top, bottom = parts[part]
            assert 0 <= top and bottom <= parts["height"], (n, part, parts)
        assert parts["result"][0] + big <= parts["height"], (n, "the number", big, parts)
        if n == 2:
            assert parts["big"] and parts["big"][1] <= parts["height"], parts
    page.screenshot(path=str(SCREENSHOTS / "presenter-853x480-last.png"))
    page.keyboard.press("Escape")
    wait_until(lambda: page.evaluate(PARTS_JS)["tabs"], 5, "Esc to bring the tabs back")
    page.get_by_role("tab", name="Present", exact=True).click()
    wait_until(lambda: page.evaluate(PARTS_JS)["tabs"] is None, 5, "Present to hide them again")
    page.locator("#present-hint .lab-present-exit").click()  # a phone has no Esc key
    wait_until(lambda: page.evaluate(PARTS_JS)["tabs"], 5, "the button to bring the tabs back")
    assert_clean_after_navigation(page, watch)


# In the page's own clock: from the press of the screen's button to the first frame of the
# app's own line in the result area (the button's "sent" line, drawn in the browser), and to the
# first frame the run itself sent (a "started" or "step k of N" line, a number, the recap).
WATCH_FIRST_FRAME_JS = """() => {
  const w = window.__labFirst = {pressed: null, shown: null, served: null, text: ''};
  const own = (more) => document.querySelector(['.present-running', '.present-big',
    '.present-recap'].map(c => '#present-result ' + c + more).join(', '));
  document.getElementById('present-run').addEventListener('click', () => {
    w.pressed = performance.now();
    const seen = () => {
      const e = own(''), run = own(':not(.present-sent)');
      if (e && w.shown === null) w.shown = performance.now();
      if (run && w.served === null) {
        w.served = performance.now(); w.text = run.closest('.present-result').innerText; }
    };
    seen();
    new MutationObserver(seen).observe(document.getElementById('present-result'),
                                       {childList: true, subtree: true, characterData: true});
  }, {capture: true, once: true});
}"""
# The payoff's box and the number's top, in viewport px.
PAYOFF_JS = """() => { const r = s => { const e = document.querySelector(s);
    const b = e && e.getBoundingClientRect(); return b && b.height ? [b.top, b.bottom] : null; };
  return {payoff: r('#present-compare'), big: r('#present-result .present-big'),
          height: window.innerHeight}; }"""
FIRST_FRAME_S = 1.0


def _projector_at_150_percent(page):
    """853×480 CSS px at a device scale of 1.5: a 1280×720 projector at 150% zoom. Returns the
    CDP session holding the override (hold it while the test runs)."""
    page.set_viewport_size({"width": 853, "height": 480})
    cdp = page.context.new_cdp_session(page)
    cdp.send("Emulation.setDeviceMetricsOverride",
             {"width": 853, "height": 480, "deviceScaleFactor": 1.5, "mobile": False})
    wait_until(lambda: page.evaluate("window.devicePixelRatio") == 1.5, 10, "the 1.5 scale")
    return cdp


def _shot(cdp, name: str) -> None:
    """A screenshot through the CDP session itself (Playwright's own resets the 1.5 scale)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    png = cdp.send("Page.captureScreenshot", {"format": "png"})["data"]
    (SCREENSHOTS / f"presenter-853x480@1.5-{name}.png").write_bytes(base64.b64decode(png))


def test_every_screen_streams_at_once_and_its_payoff_fits_a_projector(visitor, server):
    """At 853×480 @1.5 every screen, pressed, shows its own line (not Gradio's grey veil)
    within a second; each guess screen's payoff (guess against measurement, and why) is then
    inside the viewport with the number under it; the cost screen names the batching screen's
    sweep it prices; the recap shows the five big numbers, each with where it came from."""
    page, watch = visitor
    page.evaluate("localStorage.clear()")  # this run's own figures only
    goto(page, f"{app_base(server)}?present=1")
    emulation = _projector_at_150_percent(page)  # after loading: a navigation resets it
    wait_until(lambda: _screen(page) >= 1, 30, "the presenter")
    record_changes(page, "present-screen")
    page.locator("#present-machine").click()  # focus on the page, not in a field
    while _screen(page) > 1:
        _press(page, "ArrowLeft", _screen(page) - 1)
    late, served = [], []  # served: when each run's own first frame came (s after the press)
    for n, s in enumerate(SCREENS, start=1):
        if n > 1:
            _press(page, "ArrowRight", n)
        if s.predict is not None:
            page.locator("#present-guess input").fill("2")
            page.locator("#present-machine").click()
        page.evaluate(WATCH_FIRST_FRAME_JS)
        page.locator("#present-run").click()
        first = wait_until(lambda: page.evaluate(
            "window.__labFirst.served !== null && window.__labFirst"), 300,
            f"screen {n}'s first frame from its run")
        took = (first["shown"] - first["pressed"]) / 1000
        served.append((n, round((first["served"] - first["pressed"]) / 1000, 2)))
        if took > FIRST_FRAME_S:
            late.append((n, s.title, f"{took:.2f} s"))
        assert "⏳" in first["text"] or s.measure in ("tokens", "token_mix", "recap"), first
        if s.measure == "recap":
            wait_until(lambda: page.locator("#present-result .present-card").count() == 5, 30,
                       "the recap's five cards")
            break
        wait_until(lambda: page.locator("#present-result .present-big").count()
                   and not page.locator("#present-result .present-running").count(), 600,
                   f"screen {n}'s result")
        if s.measure == "cost":  # one sweep per visitor: the batching screen's, named
            assert "your batch sweep on “Serving many people at once”" in text_of(
                page, "present-result")
        if s.predict is None:
            continue
        wait_until(lambda: "measured:" in text_of(page, "present-compare"), 30,
                   f"screen {n}'s payoff")
        parts = settled_value(lambda: page.evaluate(PAYOFF_JS),
                              lambda p: p["payoff"] and p["big"])
        assert page.evaluate("window.devicePixelRatio") == 1.5
        _shot(emulation, f"payoff-{s.measure}")
        top, bottom = parts["payoff"]
        assert 0 <= top and bottom <= parts["height"], (n, s.title, "payoff", parts)
        assert parts["big"][0] < parts["height"], (n, s.title, "the number below the fold", parts)
    assert late == [], (f"screens whose own line came after {FIRST_FRAME_S} s: {late} (each "
                        f"run's first frame: {served})")
    cards = page.locator("#present-result .present-card").all_inner_texts()
    _shot(emulation, "recap")
    boxes = page.evaluate("""() => Array.from(document.querySelectorAll(
        '#present-result .present-card')).map(c => c.getBoundingClientRect().bottom)""")
    assert max(boxes) <= page.evaluate("window.innerHeight"), ("the recap's cards", boxes)
    assert all(("measured here" in c or "theoretical" in c) and "not measured yet" not in c
               for c in cards), cards  # every screen ran: each card has its figure
    assert page.evaluate("window.devicePixelRatio") == 1.5
    assert_clean_after_navigation(page, watch)
