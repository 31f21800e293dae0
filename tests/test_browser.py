"""Real-browser walk-throughs: each lesson used as a new visitor would, in headless Chromium.

The app runs as its own process (tests/e2e_server.py); every test opens it in a fresh tab,
presses the lesson's buttons, and checks that what a learner sees changes: numbers in the
text, the charts drawn with their titles, no error toasts, nothing in the browser console.
A screenshot of each lesson lands in test-artifacts/screenshots/.

To cover a new lesson, add one `test_lesson_N_...(visitor)` function: open its tab, press
its buttons, check its visible values, `screenshot(...)`, then `assert_clean(...)`.
"""
from __future__ import annotations

import re
import time

from e2e_browser import (
    assert_clean,
    click_reading,
    decode_count,
    decode_tokens,
    fill_text,
    number,
    open_tab,
    plot_points,
    plot_title,
    screenshot,
    set_slider,
    text_of,
    wait_settled,
    wait_stable,
    wait_text_change,
    wait_until,
)


def test_start_page(visitor):
    page, watch = visitor
    page.get_by_text("About this model", exact=True).click()  # one tap away, not a header
    page.locator("#model-card").wait_for()
    card = text_of(page, "model-card")
    assert "SmolLM2-135M-Instruct" in card and "30 layers" in card
    for name in ["Start here", "Try it", "1 · Tokens", "2 · Prefill", "3 · Decode"]:
        assert page.get_by_role("tab", name=name, exact=True).is_visible()
    screenshot(page, "0-start-here")
    assert_clean(page, watch)


def test_try_it_streams_an_answer(visitor):
    page, watch = visitor
    open_tab(page, "Try it")
    set_slider(page, "chat-generate", "Max new tokens", 12)
    fill_text(page, "chat-prompt", "Name three colours.")
    before = text_of(page, "chat-stats")
    page.locator("#chat-generate").click()
    first = wait_text_change(page, "chat-stats", before, timeout_s=60)
    # answering, joining the batch, or waiting its turn for a row (the server admits between
    # steps; on a loaded machine the first screen's own live answer may still hold one)
    assert "time to first token" in first or "batch" in first or "free row" in first, first

    def answering():
        text = text_of(page, "chat-stats")
        return text if "time to first token" in text else None

    stats = wait_until(answering, 60, "the first token")
    # The answer streams: the stats line is rewritten after every token until it is done.
    seen = [stats]
    done = wait_stable(page, "chat-stats", quiet_s=2.0, timeout_s=90, seen=seen)
    assert len(set(seen)) >= 2, "the stats line never changed while streaming"
    assert number(r"time to first token ([\d,]+) ms", done) > 0
    assert 1 <= number(r"(\d+) tokens generated", done) <= 12
    box = text_of(page, "chat-box")
    assert "Name three colours." in box
    answer = box.split("Name three colours.", 1)[1].strip()
    assert len(answer) > 0, "no assistant text appeared"
    screenshot(page, "chat-try-it")
    assert_clean(page, watch)


def test_lesson_1_tokens(visitor):
    page, watch = visitor
    open_tab(page, "1 · Tokens")
    counts0, cost0 = text_of(page, "tok-counts"), text_of(page, "tok-cost")
    fill_text(page, "tok-text", "The cat sat on the mat.")
    counts = wait_text_change(page, "tok-counts", counts0)
    plain_tokens = number(r"([\d,]+) tokens", counts)
    assert number(r"([\d,]+) characters", counts) == len("The cat sat on the mat.")
    assert 5 <= plain_tokens <= 10
    assert "cat" in text_of(page, "tok-view")
    cost = wait_text_change(page, "tok-cost", cost0)
    input_tokens = number(r"([\d,]+) input tokens", cost)
    assert input_tokens > plain_tokens  # the chat template wraps the text

    page.locator("#tok-template input[type=checkbox]").check()
    wrapped = wait_text_change(page, "tok-counts", counts)
    assert number(r"([\d,]+) tokens", wrapped) > plain_tokens
    assert "special" in wrapped
    assert "im_start" in text_of(page, "tok-view")

    panel = page.locator("#tok-cost").locator("xpath=ancestor::div[@role='tabpanel']")
    out_box = panel.get_by_label("Expected output tokens", exact=True)
    out_box.fill("1000")
    out_box.press("Enter")
    out_box.blur()
    new_cost = wait_text_change(page, "tok-cost", cost)
    assert number(r"([\d,]+) output tokens", new_cost) == 1000
    assert number(r"per request \$([\d.]+)", new_cost) > number(r"per request \$([\d.]+)", cost)
    screenshot(page, "lesson-1-tokens")
    assert_clean(page, watch)


def test_lesson_2_prefill(visitor):
    page, watch = visitor
    open_tab(page, "2 · Prefill")
    fill_text(page, "prefill-prompt", "Tell me a short fact about octopuses.")
    before = text_of(page, "prefill-result")
    page.locator("#prefill-run").click()
    result = wait_text_change(page, "prefill-result", before, timeout_s=60)
    assert "Measured on this machine" in result
    assert number(r"your prompt is ([\d,]+) tokens", result) > 10
    assert number(r"Prefill: all \d+ tokens in one forward pass: ([\d,]+) ms", result) > 0

    # A small sweep: lengths 1 and 8, one-at-a-time measured up to 8 tokens.
    for n in ["32", "128", "512"]:
        page.locator("label").filter(has_text=re.compile(rf"^\s*{n}\s*$")).first.click()
    set_slider(page, "prefill-sweep", "Measure one-at-a-time up to (tokens); longer is "
               "extrapolated", 8)
    page.locator("#prefill-sweep").click()
    wait_until(lambda: "Done." in text_of(page, "prefill-progress"), 120, "the sweep to finish")
    progress = text_of(page, "prefill-progress")
    assert "At 8 tokens" in progress, progress
    wait_until(lambda: plot_points(page, "prefill-chart") >= 4, 30, "the sweep chart")
    assert plot_title(page, "prefill-chart").startswith("Prefill is parallel")
    screenshot(page, "lesson-2-prefill")
    assert_clean(page, watch)


def test_lesson_3_decode(visitor):
    page, watch = visitor
    open_tab(page, "3 · Decode")
    fill_text(page, "decode-prompt", "Write one sentence about rivers.")
    assert decode_tokens(page) == 0

    page.locator("#decode-step").click()
    wait_until(lambda: decode_tokens(page) == 1, 60, "the first Step")
    stats = text_of(page, "decode-stats")
    assert number(r"Time to first token\s*([\d,]+) ms", stats) > 0  # its card
    assert number(r"(\d+) positions, one behind the text", stats) > 10
    wait_until(lambda: (plot_title(page, "decode-candidates") or "").startswith("Candidates"),
               30, "the candidates chart")
    page.locator("#decode-step").click()
    wait_until(lambda: decode_tokens(page) == 2, 60, "the second Step")
    wait_until(lambda: plot_title(page, "decode-timing") == "Time per output token", 30,
               "the timing chart")
    assert "tokens/s" in text_of(page, "decode-stats")

    # Play presses Step on a timer; Pause stops it.
    page.locator("#decode-play").click()
    wait_until(lambda: decode_tokens(page) >= 5, 90, "Play to add tokens")
    at_pause = decode_count(click_reading(page, "decode-pause", "decode-stats"))
    # Tokens still coming after Pause: the stats never settle (wait_settled fails), or
    # settle more than the one tick that was already running past the click.
    paused_at = decode_count(wait_settled(page, "decode-stats"))
    assert at_pause <= paused_at <= at_pause + 1, f"{at_pause} at Pause, {paused_at} after"
    screenshot(page, "lesson-3-decode")

    # Branch: replace the newest token with the pre-selected other candidate.
    text_before = text_of(page, "decode-output")
    page.locator("#decode-branch").click()
    branched = wait_text_change(page, "decode-output", text_before, timeout_s=60)
    assert decode_tokens(page) == paused_at
    assert branched != text_before
    screenshot(page, "lesson-3-decode-branch")

    # Play then Stop: the run ends, marked as stopped by the learner.
    page.locator("#decode-play").click()
    wait_until(lambda: decode_tokens(page) > paused_at, 60, "Play to resume")
    page.locator("#decode-stop").click()
    wait_until(lambda: "stopped by you" in text_of(page, "decode-stats"), 30, "Stop")
    assert decode_tokens(page) > paused_at

    page.locator("#decode-reset").click()
    wait_until(lambda: decode_tokens(page) == 0, 30, "Reset to clear the tokens")
    assert "Press" in text_of(page, "decode-output")
    assert_clean(page, watch)



FROM_LINK = "from your teacher's link"
PHONE = {"width": 390, "height": 844}


def test_lesson_3_on_a_phone_from_a_teachers_link(server, browser):
    """A teacher's `?lesson=decode&prompt=…` link on a 390×844 phone: Decode opens with the
    prompt filled and a line saying so (none when the link carries no prompt), and after Step
    the answer's tokens are within one screen of the Step button (the stacked cards and charts
    had put them 1,550 px below it)."""
    from e2e_browser import new_visitor

    base = server.url.rstrip("/") + "/"
    page, watch = new_visitor(browser, base + "?lesson=decode")
    try:  # no prompt in the link: the tab opens (the same reply would fill a box), no line
        wait_until(lambda: page.get_by_role("tab", name="3 · Decode", exact=True)
                   .get_attribute("aria-selected") == "true", 30, "Decode opened by the link")
        assert FROM_LINK not in page.locator("body").inner_text()
        assert_clean(page, watch)
    finally:
        page.close()

    page, watch = new_visitor(browser, base + "?lesson=decode&prompt=Hello")
    try:
        page.set_viewport_size(PHONE)
        box = page.locator("#decode-prompt textarea")
        wait_until(lambda: box.input_value() == "Hello", 30, "the prompt filled from the link")
        assert FROM_LINK in text_of(page, "decode-prompt")
        assert page.get_by_text(FROM_LINK).is_visible()
        page.locator("#decode-step").click()
        wait_until(lambda: decode_tokens(page) == 1, 60, "the first Step")
        step = page.locator("#decode-step").bounding_box()
        tokens = page.locator("#decode-output").bounding_box()
        assert step["y"] < tokens["y"] <= step["y"] + PHONE["height"], (step, tokens)
        page.locator("#decode-step").scroll_into_view_if_needed()
        screenshot(page, "phone-decode-from-a-link")
        assert_clean(page, watch)
    finally:
        page.close()

def test_lesson_3_stop_during_play_is_final(visitor):
    page, watch = visitor
    open_tab(page, "3 · Decode")
    fill_text(page, "decode-prompt", "Count slowly from one to twenty.")
    set_slider(page, "decode-step", "Play: pause between steps (s)", 0.05)
    page.locator("#decode-play").click()
    wait_until(lambda: decode_tokens(page) >= 4, 60, "Play to add tokens")
    shown = decode_count(click_reading(page, "decode-stop", "decode-stats"))
    wait_until(lambda: "stopped by you" in text_of(page, "decode-stats"), 30, "Stop")
    # Stop keeps exactly the tokens on screen when it was pressed (the step in flight is
    # test_lesson_3_stop_is_final_for_the_step_in_flight), and no queued tick may run after
    # it: a restarted run would keep the stats changing (never settling) or change the count.
    final = wait_settled(page, "decode-stats")
    assert decode_count(final) == shown, f"{shown} tokens when Stop was pressed, then {final!r}"
    assert "stopped by you" in final


def stop_mid_step(page) -> tuple[int, int]:
    """Play, then press Stop while a Play tick's step is running. Return (tokens on screen
    at the instant Stop was clicked, tokens on screen once everything has settled)."""
    page.locator("#decode-play").click()
    wait_until(lambda: decode_tokens(page) >= 2, 60, "Play to add tokens")
    page.wait_for_function(  # a tick just landed; the browser sends the next one within 50 ms
        """n => { const m = document.querySelector('#decode-stats').innerText
                                   .match(/Tokens:\\s*(\\d+)/);
                  return m && +m[1] > n; }""", arg=decode_tokens(page), timeout=30_000)
    time.sleep(0.08)  # aim, not a wait: its step takes 100+ ms here, so Stop lands inside it
    shown = decode_count(click_reading(page, "decode-stop", "decode-stats"))
    wait_until(lambda: "stopped by you" in text_of(page, "decode-stats"), 30, "Stop")
    return shown, decode_count(wait_settled(page, "decode-stats"))


def test_lesson_3_stop_is_final_for_the_step_in_flight(visitor):
    page, watch = visitor
    open_tab(page, "3 · Decode")
    fill_text(page, "decode-prompt", "Count slowly from one to twenty.")
    set_slider(page, "decode-step", "Play: pause between steps (s)", 0.05)
    for _ in range(3):  # Play after a stopped run starts a fresh one
        at_click, final = stop_mid_step(page)
        assert final == at_click, f"{at_click} tokens shown when Stop was pressed, {final} after"
    assert_clean(page, watch)
