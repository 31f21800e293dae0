"""In a real browser: the screen a class sees at three sizes, a phone (390×844), a
projector (1280×720) and a laptop (1440×900).

Token chips wrap inside the viewport (lesson 1 with the chat template, Decode after many steps),
every lesson tab is on screen and one tap away (on a phone, one swipe of the strip away; also
after scrolling down: the strip is sticky), typing a step number redraws that step's
candidates before Branch and Branch continues with one of them, the prefill sweep's verdict
reads the same when shared, and no chart's legend box overlaps its title. Screenshots for
each size go to test-artifacts/screenshots/screen-*.
"""
from __future__ import annotations

import re

import lessons
from e2e_browser import (
    assert_clean,
    decode_tokens,
    fill_text,
    judged_busy,
    new_visitor,
    open_tab,
    plot_title,
    screenshot,
    set_slider,
    settled_value,
    text_of,
    wait_text_change,
    wait_until,
)
from inference.config import LIMITS

# A phone, a projector, a laptop, and the projector at 150% zoom (1280×720 ÷ 1.5 in CSS px).
SIZES = [(390, 844), (1280, 720), (1440, 900), (853, 480)]
TABS = [t.label for t in lessons.TABS]  # every tab, in order
LONG_TEXT = ("Tokenizers split words like antidisestablishmentarianism, numbers like 1234567 "
             "and emoji 🍕🚀 into pieces: the model reads these pieces, not letters.")


def chips_outside(page, selector: str) -> tuple[int, list[str]]:
    """(how many chips `selector` holds, those not wholly inside the viewport's width)."""
    return page.evaluate(
        """sel => { const w = document.documentElement.clientWidth;
                    const chips = Array.from(document.querySelectorAll(sel + ' .lab-tok'));
                    const out = chips.filter(c => { const r = c.getBoundingClientRect();
                      return r.left < -0.5 || r.right > w + 0.5; })
                      .map(c => c.innerText.trim());
                    return [chips.length, out]; }""", selector)


def overlapping_legends(page) -> list[str]:
    """Charts on the page whose legend box intersects their title (or its caption)."""
    return page.evaluate(
        """() => { const hit = (a, b) => a.left < b.right && b.left < a.right
                                         && a.top < b.bottom && b.top < a.bottom;
                   const bad = [];
                   document.querySelectorAll('.js-plotly-plot').forEach(g => {
                     const legend = g.querySelector('.legend');
                     if (!legend || !legend.getBoundingClientRect().width) return;
                     const l = legend.getBoundingClientRect();
                     g.querySelectorAll('.gtitle, .gtitle-subtitle').forEach(t => {
                       const r = t.getBoundingClientRect();
                       if (r.width && hit(l, r)) bad.push((g.closest('[id]') || g).id || '?');
                     }); });
                   return bad; }""")


def drawn_legends(page) -> int:
    return page.evaluate(
        "() => Array.from(document.querySelectorAll('.js-plotly-plot .legend'))"
        ".filter(l => l.getBoundingClientRect().width > 0).length")


def test_token_chips_wrap_at_every_size(visitor):
    page, watch = visitor
    open_tab(page, "1 · Tokens")
    counts = text_of(page, "tok-counts")
    fill_text(page, "tok-text", LONG_TEXT)
    counts = wait_text_change(page, "tok-counts", counts)
    page.locator("#tok-template input[type=checkbox]").check()
    wait_text_change(page, "tok-counts", counts)
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        n, outside = settled_value(lambda: chips_outside(page, "#tok-view"),
                                   lambda r: r[0] > 40 and not r[1])
        assert n > 40, f"only {n} chips drawn"
        assert outside == [], f"{len(outside)} of {n} chips off screen at {width}px: {outside}"
        page.locator("#tok-view").scroll_into_view_if_needed()
        screenshot(page, f"screen-{width}x{height}-lesson-1-template")
    assert_clean(page, watch)


# Two different characters drawn the same are the missing-glyph box ("tofu") twice.
SAME_GLYPH_JS = """([a, b]) => {
  const draw = (ch) => { const c = document.createElement('canvas'); c.width = c.height = 48;
    const x = c.getContext('2d'); x.font = '40px sans-serif'; x.fillText(ch, 2, 40);
    return Array.from(x.getImageData(0, 0, 48, 48).data).join(','); };
  return draw(a) === draw(b); }"""


def test_japanese_tokens_are_drawn_not_boxes(visitor):
    """Japanese text once showed as boxes in the browser (no CJK font installed)."""
    page, watch = visitor
    open_tab(page, "1 · Tokens")
    counts = text_of(page, "tok-counts")
    fill_text(page, "tok-text", "日本語のテキストはトークンが多い。")
    wait_text_change(page, "tok-counts", counts)
    for a, b in [("日", "本"), ("の", "テ")]:
        assert not page.evaluate(SAME_GLYPH_JS, [a, b]), f"{a} and {b} drawn as the same box"
    assert page.evaluate(SAME_GLYPH_JS, ["\U0010fffd", "\U0010fffe"])  # the check sees tofu
    page.locator("#tok-view").scroll_into_view_if_needed()
    screenshot(page, "lesson-1-japanese")
    assert_clean(page, watch)


def test_every_tab_is_one_tap_away_and_stays_on_screen(visitor):
    page, watch = visitor
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        phone = width <= 640  # one strip that scrolls sideways (assets/style.css)
        last = page.get_by_role("tab", name=TABS[-1], exact=True)
        if phone:
            last.scroll_into_view_if_needed()
        settled_value(last.bounding_box,
                      lambda b, w=width: b is not None and b["x"] + b["width"] <= w)
        assert page.get_by_role("button", name="More tabs").count() == 0 or not \
            page.get_by_role("button", name="More tabs").is_visible()
        for name in TABS:
            tab = page.get_by_role("tab", name=name, exact=True)
            if phone:  # one swipe of the strip away: scrolled to, it lies on screen
                tab.scroll_into_view_if_needed()
            box = tab.bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, \
                f"tab {name!r} not on screen at {width}px: {box}"
            assert box["width"] >= 24 and box["height"] >= 24, f"{name!r} too small to tap"
        # Scrolled to the bottom of a long lesson, the strip is still there (sticky).
        open_tab(page, "3 · Decode")
        page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
        tab = page.get_by_role("tab", name="1 · Tokens", exact=True)
        box = settled_value(tab.bounding_box,
                            lambda b, h=height: b is not None and 0 <= b["y"] <= h - b["height"])
        assert box and 0 <= box["y"] and box["y"] + box["height"] <= height, \
            f"the tab strip scrolled away at {width}x{height}: {box}"
        tab.click()
        assert tab.get_attribute("aria-selected") == "true"
        page.evaluate("window.scrollTo(0, 0)")
        screenshot(page, f"screen-{width}x{height}-start")
    assert_clean(page, watch)


def test_start_prompt_opens_try_it_filled_in(visitor):
    page, watch = visitor
    page.set_viewport_size({"width": 390, "height": 844})
    page.locator("#start-prompts button").first.click()
    wait_until(lambda: page.get_by_role("tab", name="Try it", exact=True)
               .get_attribute("aria-selected") == "true", 10, "Try it to open")
    value = page.locator("#chat-prompt textarea").input_value()
    assert value == LIMITS.default_prompt
    page.locator("#next-chat").click()
    wait_until(lambda: page.get_by_role("tab", name="1 · Tokens", exact=True)
               .get_attribute("aria-selected") == "true", 10, "Next lesson to open lesson 1")
    assert_clean(page, watch)


def candidate_ids(page) -> list[int]:
    """Token ids in the candidates chart (bar labels end in '#id')."""
    labels = page.evaluate(
        """() => { const g = document.querySelector('#decode-candidates .js-plotly-plot');
                   return g && g.data && g.data[0] ? Array.from(g.data[0].y) : []; }""")
    return [int(m.group(1)) for s in labels if (m := re.search(r"#(\d+)$", s))]


def chip_info(page, step: int) -> str:
    return page.evaluate(
        """k => { const c = Array.from(document.querySelectorAll('#decode-output .lab-tok'))[k];
                  return c ? c.getAttribute('data-info') : ''; }""", step)


def test_typed_step_redraws_candidates_and_branch_uses_them(visitor):
    page, watch = visitor
    page.set_viewport_size({"width": 1280, "height": 720})
    open_tab(page, "3 · Decode")
    fill_text(page, "decode-prompt", "Write one sentence about the moon.")
    for n in range(1, 7):
        page.locator("#decode-step").click()
        wait_until(lambda n=n: decode_tokens(page) == n, 60, f"Step {n}")
    wait_until(lambda: "step 5" in (plot_title(page, "decode-candidates") or ""), 30,
               "the candidates of step 5")
    at_five = candidate_ids(page)

    set_slider(page, "decode-branch", "Branch: look at step", 2)
    wait_until(lambda: "step 2" in (plot_title(page, "decode-candidates") or ""), 30,
               "typing 2 to redraw the candidates chart for step 2")
    at_two = candidate_ids(page)
    assert at_two and at_two != at_five
    assert f"id {at_two[-1]}" in chip_info(page, 2)  # the top bar is the token taken there
    before = text_of(page, "decode-output")
    page.locator("#decode-branch").click()
    wait_text_change(page, "decode-output", before, timeout_s=60)
    wait_until(lambda: decode_tokens(page) == 3, 30, "the branch to keep steps 0-2")
    info = chip_info(page, 2)
    picked = int(re.search(r"id (\d+)", info).group(1))
    assert "your pick" in info and picked in at_two, (info, at_two)
    assert "1 step left out: your branch pick" in text_of(page, "decode-stats")
    screenshot(page, "screen-1280x720-decode-branch")
    assert_clean(page, watch)


def test_decode_chips_wrap_after_many_steps(visitor):
    page, watch = visitor
    page.set_viewport_size({"width": 390, "height": 844})
    open_tab(page, "3 · Decode")
    fill_text(page, "decode-prompt", "Write a long story about a dragon who learns to bake.")
    set_slider(page, "decode-step", "Max new tokens", 28)  # at least 20 made: rows to wrap
    set_slider(page, "decode-step", "Play: pause between steps (s)", 0.05)
    page.locator("#decode-play").click()
    wait_until(lambda: "Finished" in text_of(page, "decode-stats"), 240, "Play to finish")
    made = decode_tokens(page)
    assert made >= 20, f"only {made} tokens: too few to need wrapping"
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        n, outside = settled_value(lambda: chips_outside(page, "#decode-output"),
                                   lambda r: r[0] == made and not r[1])
        assert n == made and outside == [], f"{outside} off screen at {width}px"
        assert overlapping_legends(page) == []
        page.locator("#decode-output").scroll_into_view_if_needed()
        screenshot(page, f"screen-{width}x{height}-decode")
    assert drawn_legends(page) >= 1
    assert_clean(page, watch)


def verdict(progress: str) -> str:
    """The sweep's cards and its "Done." sentence (what follows, a shared-result note, differs;
    so does the label a reused run gets above them: `shared_runs.SHARED_EARLIER`)."""
    cards, rest = progress.split("Done.", 1)
    head = cards.strip().splitlines()
    if head and "for another visitor with the same settings" in head[0]:
        cards = "\n".join(head[1:])
    return (cards.strip() + "\nDone." + rest.splitlines()[0]).strip()


def test_shared_sweep_keeps_its_verdict_and_legends_clear_titles(server, browser):
    lines = []
    for width, height in [(390, 844), (1440, 900), (853, 480)]:
        page, watch = new_visitor(browser, server.url)
        page.set_viewport_size({"width": width, "height": height})
        open_tab(page, "2 · Prefill")
        for n in ["128", "512"]:  # lengths 1, 8, 32; a key no other test sweeps
            page.locator("label").filter(has_text=re.compile(rf"^\s*{n}\s*$")).first.click()
        set_slider(page, "prefill-sweep", "Measure one-at-a-time up to (tokens); longer is "
                   "extrapolated", 16)
        page.locator("#prefill-sweep").click()
        wait_until(lambda p=page: "Done." in text_of(p, "prefill-progress"), 180, "the sweep")
        lines.append(text_of(page, "prefill-progress"))
        wait_until(lambda p=page: drawn_legends(p) >= 1, 10, "the sweep chart's legend")
        assert overlapping_legends(page) == []
        page.locator("#prefill-chart").scroll_into_view_if_needed()
        screenshot(page, f"screen-{width}x{height}-prefill-sweep")
        assert_clean(page, watch)
        page.close()
    # The browser shares this machine's cores, so a run may be judged busy: it draws no verdict
    # and no later visitor is shown it. The first quiet run is shown to the next visitor.
    busy = [judged_busy(t) for t in lines]
    for text, was_busy in zip(lines, busy):
        assert "Done. At 8 tokens" in verdict(text), text
        assert ("no verdict from this run" in verdict(text)) == was_busy, text
    quiet = [i for i, b in enumerate(busy) if not b and not shared(lines[i])]
    for i in range(len(lines) - 1):
        if busy[i]:  # a busy run is reused by no one: the next visitor measured afresh
            assert not shared(lines[i + 1]), lines
    if quiet and quiet[0] + 1 < len(lines):  # the cards and the verdict, the same when shared
        first, again = lines[quiet[0]], lines[quiet[0] + 1]
        assert shared(again) and verdict(first) == verdict(again), lines


def shared(progress: str) -> bool:
    """The visitor was shown a run measured for someone else: the sweep's own shared result,
    or the app's rule for identical measurements (classroom/shared_runs.py)."""
    return "shared result" in progress or "for another visitor with the same settings" in progress


def test_padding_chart_labels_every_row_on_a_phone(visitor):
    """On a phone the padding chart once drew 1 of its 3 row labels."""
    page, watch = visitor
    page.set_viewport_size({"width": 390, "height": 844})
    open_tab(page, "5 · Batching")
    page.get_by_role("tab", name="2 · Padding", exact=True).click()
    before = text_of(page, "batch-pad-text")
    fill_text(page, "batch-pad-prompts", "Hi\nPlease describe, in a few careful sentences, how "
              "a bicycle gear works.\nWhat is 2 + 2?")
    page.locator("#batch-pad-btn").click()
    wait_text_change(page, "batch-pad-text", before, 30)
    labels = wait_until(lambda: page.evaluate("""() => Array.from(document.querySelectorAll(
        '#batch-pad-plot .ytick text')).map(t => t.textContent).filter(Boolean)""") or None,
        15, "the row labels")
    assert len(labels) == 3, labels
    page.locator("#batch-pad-plot").scroll_into_view_if_needed()
    screenshot(page, "screen-390x844-padding")
    assert_clean(page, watch)


def test_decode_step_and_both_charts_fit_a_projector_screen(visitor):
    """At 1280×720 the Step button and both decode charts once never fit one screen."""
    page, watch = visitor
    page.set_viewport_size({"width": 1280, "height": 720})
    open_tab(page, "3 · Decode")
    fill_text(page, "decode-prompt", "Write one sentence about the sea.")
    for n in (1, 2):
        page.locator("#decode-step").click()
        wait_until(lambda n=n: decode_tokens(page) == n, 60, f"step {n}")
    wait_until(lambda: plot_title(page, "decode-timing") == "Time per output token", 30,
               "the timing chart")
    box = page.evaluate("""() => {
        const r = (id) => document.getElementById(id).getBoundingClientRect();
        const tabs = document.querySelector('#lesson-tabs > .tab-wrapper').getBoundingClientRect();
        window.scrollBy(0, r('decode-step').top - tabs.bottom - 8);
        return {tabs: document.querySelector('#lesson-tabs > .tab-wrapper')
                        .getBoundingClientRect().bottom,
                step: r('decode-step').top, candidates: r('decode-candidates').bottom,
                timing: r('decode-timing').bottom, height: window.innerHeight}; }""")
    assert box["step"] >= box["tabs"], box  # the button is below the sticky tab strip
    assert max(box["candidates"], box["timing"]) <= box["height"], box
    screenshot(page, "screen-1280x720-decode")
    assert_clean(page, watch)
