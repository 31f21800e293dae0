"""In a real browser: the mechanism diagram in lessons 2, 3 and 4.

Each test presses a lesson's buttons and reads the drawn diagram back from the page (its data
attributes and its cell runs): the strips hold one cell per cached position after every
Step, the beat lasts the measured time × the factor, Replay restarts the animation, Pause
holds it, a speed button changes it, reduced motion stills it, and the console stays clean.
Screenshots of each state go to test-artifacts/screenshots/diagram-*.png.
"""
from __future__ import annotations

import pytest

from e2e_browser import (
    SCREENSHOTS,
    assert_clean,
    decode_tokens,
    fill_text,
    number,
    open_tab,
    plot_title,
    set_slider,
    text_of,
    wait_until,
)

# The diagram inside #elem_id read back: root data, and per lane its strips' cell counts.
READ = """id => { const root = document.querySelector('#' + id + ' .mech');
  if (!root) return null;
  const lanes = Array.from(root.querySelectorAll('.mech-lane')).map(lane => ({
    kind: lane.dataset.kind, cached: +lane.dataset.cached, ms: +lane.dataset.ms,
    strips: Array.from(lane.querySelectorAll('.mech-strip')).map(s => {
      const runs = Array.from(s.querySelectorAll('.mech-cells'));
      const sum = f => runs.filter(f).reduce((n, r) => n + +r.dataset.cells, 0);
      return {all: sum(() => true), prompt: sum(r => r.classList.contains('mech-cells-p')),
              generated: sum(r => r.classList.contains('mech-cells-g')),
              fresh: sum(r => r.dataset.new === '1')}; })}));
  return {empty: root.classList.contains('mech-empty'), step: root.dataset.step,
          factor: +root.dataset.factor, groups: +root.dataset.groups, head:
          root.querySelector('.mech-head').innerText, lanes}; }"""

# The clock bar's animation in the first lane: state, time into it, total length (ms).
CLOCK = """id => { const bar = document.querySelector('#' + id + ' .mech-clock');
  const a = bar && bar.getAnimations()[0];
  if (!a) return null;
  const t = a.effect.getComputedTiming();
  return {state: a.playState, at: +a.currentTime, length: t.duration + t.delay,
          name: a.animationName}; }"""


def diagram(page, elem_id: str) -> dict | None:
    return page.evaluate(READ, elem_id)


def clock(page, elem_id: str) -> dict | None:
    return page.evaluate(CLOCK, elem_id)


def held_clock(page, elem_id: str) -> dict:
    """The clock once Pause has taken hold: paused, and the same time on two reads a poll
    apart (the animation's time can move one more frame after it reports paused)."""
    last: list[dict | None] = [None]

    def read() -> dict | None:
        c, before = clock(page, elem_id), last[0]
        last[0] = c
        return c if before and c["state"] == "paused" and c["at"] == before["at"] else None
    return wait_until(read, 5, "Pause to hold the beat")


def press(page, elem_id: str, label_class: str) -> None:
    """Click one of the diagram's own controls (a label) inside #elem_id."""
    page.locator(f"#{elem_id} .{label_class}").first.click()


def screenshot(locator, name: str) -> None:
    """A picture of the diagram alone (the page is long) in test-artifacts/screenshots/."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    locator.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def strips_hold(d: dict, lane: int, prompt: int, generated: int, fresh: int) -> bool:
    strips = d["lanes"][lane]["strips"]
    return len(strips) == d["groups"] and all(
        s["prompt"] == prompt and s["generated"] == generated and s["fresh"] == fresh
        for s in strips)


def test_diagram_prefill_lesson(visitor):
    page, watch = visitor
    open_tab(page, "2 · Prefill")
    assert diagram(page, "prefill-diagram")["empty"]
    fill_text(page, "prefill-prompt", "Tell me a short fact about octopuses.")
    page.locator("#prefill-run").click()
    d = wait_until(lambda: (x := diagram(page, "prefill-diagram")) and not x["empty"] and x,
                   90, "the prefill diagram")
    n = int(number(r"your prompt is ([\d,]+) tokens", text_of(page, "prefill-result")))
    assert d["groups"] == 10 and d["lanes"][0]["kind"] == "prefill"
    assert strips_hold(d, 0, prompt=n, generated=0, fresh=n), d["lanes"][0]["strips"][0]
    assert strips_hold(d, 1, prompt=n, generated=1, fresh=1)  # the decode step after it
    assert f"Prefill: {n} tokens in one pass" in d["head"]
    # the beat lasts the measured prefill × the factor shown
    c = clock(page, "prefill-diagram")
    assert c["length"] == pytest.approx(d["lanes"][0]["ms"] * d["factor"], rel=1e-3)
    page.wait_for_timeout(300)
    press(page, "prefill-diagram", "mech-pause-label")
    screenshot(page.locator("#prefill-diagram"), "diagram-lesson-2-prefill-mid-beat")
    assert_clean(page, watch)


def test_diagram_decode_advances_one_beat_per_step(visitor):
    page, watch = visitor
    open_tab(page, "3 · Decode")
    fill_text(page, "decode-prompt", "Write one sentence about rivers.")
    assert diagram(page, "decode-diagram")["empty"]
    screenshot(page.locator("#decode-diagram"), "diagram-lesson-3-empty")
    prompt = None
    for k in range(1, 4):
        page.locator("#decode-step").click()
        wait_until(lambda k=k: decode_tokens(page) == k, 60, f"Step {k}")
        d = wait_until(lambda k=k: (x := diagram(page, "decode-diagram")) and x["step"] == str(
            k - 1) and x, 10, f"the diagram of step {k - 1}")
        cache = int(number(r"(\d+) positions, one behind", text_of(page, "decode-stats")))
        prompt = prompt or cache
        assert d["lanes"][0]["kind"] == ("prefill" if k == 1 else "decode")
        assert d["lanes"][0]["cached"] == cache == prompt + k - 1
        assert strips_hold(d, 0, prompt=prompt, generated=k - 1,
                           fresh=prompt if k == 1 else 1), d["lanes"][0]["strips"][0]
        screenshot(page.locator("#decode-diagram"), f"diagram-lesson-3-step-{k - 1}")

    # Branch at step 1: the strips rewind to the prompt + 1 position.
    set_slider(page, "decode-branch", "Branch: look at step", 1)
    wait_until(lambda: "step 1" in (plot_title(page, "decode-candidates") or ""), 30,
               "the candidates of step 1")
    page.locator("#decode-branch").click()
    d = wait_until(lambda: (x := diagram(page, "decode-diagram")) and x["step"] == "1"
                   and decode_tokens(page) == 2 and x, 60, "the diagram after Branch")
    assert strips_hold(d, 0, prompt=prompt, generated=1, fresh=1)
    screenshot(page.locator("#decode-diagram"), "diagram-lesson-3-branched")
    assert_clean(page, watch)


def test_diagram_replays_pauses_and_changes_speed(visitor):
    page, watch = visitor
    open_tab(page, "3 · Decode")
    fill_text(page, "decode-prompt", "Name a river.")
    page.locator("#decode-step").click()
    wait_until(lambda: (x := diagram(page, "decode-diagram")) and x["step"] == "0", 60,
               "the first beat")
    first = clock(page, "decode-diagram")
    wait_until(lambda: clock(page, "decode-diagram")["state"] == "finished",
               first["length"] / 1000 + 10, "the beat to end")

    press(page, "decode-diagram", "mech-replay-label")
    again = wait_until(lambda: (c := clock(page, "decode-diagram"))["state"] == "running"
                       and c, 5, "Replay to restart the beat")
    assert again["name"].endswith("-again") and again["at"] < again["length"]

    press(page, "decode-diagram", "mech-pause-label")
    held = held_clock(page, "decode-diagram")
    page.wait_for_timeout(400)
    assert clock(page, "decode-diagram")["state"] == "paused"
    assert clock(page, "decode-diagram")["at"] == held["at"]
    screenshot(page.locator("#decode-diagram"), "diagram-lesson-3-paused")
    press(page, "decode-diagram", "mech-pause-label")

    factor = diagram(page, "decode-diagram")["factor"]
    # Another speed than the one shown (a slow step on a busy machine already sits at the
    # smallest factor, so the other may be slower or faster): the beat is replayed at it.
    labels = page.locator("#decode-diagram .mech-controls label[class^='mech-speed-']")
    other = next(label for label in labels.all()
                 if int(label.get_attribute("class").split("-")[-1]) != factor)
    slowed = int(other.get_attribute("class").split("-")[-1])
    assert slowed != factor and labels.count() >= 2
    other.click()
    expected = first["length"] * slowed / factor  # the same beat, replayed at the new speed
    wait_until(lambda: clock(page, "decode-diagram")["length"] == pytest.approx(expected,
                                                                               rel=1e-3),
               5, "the beat at the new speed")
    assert f"slowed {slowed}×: 1 s on screen = {1000 / slowed:g} ms measured" in text_of(
        page, "decode-diagram")
    assert_clean(page, watch)


def test_diagram_reduced_motion_shows_the_end_state(visitor):
    page, watch = visitor
    page.emulate_media(reduced_motion="reduce")
    open_tab(page, "3 · Decode")
    fill_text(page, "decode-prompt", "Name a lake.")
    page.locator("#decode-step").click()
    wait_until(lambda: (x := diagram(page, "decode-diagram")) and x["step"] == "0", 60,
               "the first beat")
    assert clock(page, "decode-diagram") is None  # no animation at all
    assert page.locator("#decode-diagram .mech-still").is_visible()
    screenshot(page.locator("#decode-diagram"), "diagram-lesson-3-reduced-motion")
    assert_clean(page, watch)


def test_diagram_race_lesson(visitor):
    page, watch = visitor
    open_tab(page, "4 · KV cache")
    open_tab(page, "2 · Race: cache on vs off")
    assert diagram(page, "kv-race-diagram")["empty"]
    set_slider(page, "kv-race-btn", "New tokens", 4)
    page.locator("#kv-race-btn").click()
    wait_until(lambda: "Step 4 of 4" in text_of(page, "kv-race-progress"), 90, "the race")
    d = wait_until(lambda: (x := diagram(page, "kv-race-diagram")) and x["step"] == "3" and x,
                   60, "the race diagram's last step")  # step 4's chunk follows its line
    cached, plain = d["lanes"]
    prompt = cached["cached"] - 3
    assert strips_hold(d, 0, prompt=prompt, generated=3, fresh=1)
    assert strips_hold(d, 1, prompt=0, generated=0, fresh=0)  # nothing kept without a cache
    assert f"without it {prompt + 3} tokens in again" in d["head"]
    assert plain["ms"] > 0 and cached["ms"] > 0
    page.wait_for_timeout(500)
    press(page, "kv-race-diagram", "mech-pause-label")
    screenshot(page.locator("#kv-race-diagram"), "diagram-lesson-4-race")
    assert_clean(page, watch)
