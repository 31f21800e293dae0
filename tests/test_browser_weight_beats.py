"""In a real browser: lessons 5 and 6's live beats on the mechanism diagram
(`visualizations/mechanism.py`), shown right under each lesson's first chart.

Each test runs its lesson's measurement with the smallest settings (lesson 5: batch sizes 1
and 2, the fewest timed steps; lesson 6: float32 and int8, the fewest greedy tokens), reads the
drawn beat back from the page (its lanes' rows and measured milliseconds, its head sentence)
and checks every figure against the lesson's own table. At 1280×720 the beat does not share a
screen with the lesson's button once the run has drawn the first chart (measured on the
2-core CI machine: Run sweep at y≈84 px, the beat from y≈862 px; Compare modes at y≈84 px,
the beat from y≈790 px), so the tests assert what the layout promises instead: the button on
screen under the tab bar, the beat directly under the first chart, and the beat's head (its
measured sentence) on the screen where the beat starts. Screenshots go to
test-artifacts/screenshots/weight-beat-*.png.
"""
from __future__ import annotations

import pytest

from e2e_browser import (
    SCREENSHOTS,
    assert_clean,
    choose_option,
    number,
    open_tab,
    set_slider,
    table_rows,
    text_of,
    wait_until,
)
from inference.config import LIMITS

PROJECTOR = {"width": 1280, "height": 720}
# The beat inside #elem_id read back: root data, head sentence, and per lane its rows and ms.
BEAT = """id => { const root = document.querySelector('#' + id + ' .mech');
  if (!root) return null;
  return {empty: root.classList.contains('mech-empty'), step: root.dataset.step,
          head: (root.querySelector('.mech-head') || {}).innerText || '',
          lanes: Array.from(root.querySelectorAll('.mech-lane')).map(l => ({
            rows: +l.dataset.rows, ms: +l.dataset.ms}))}; }"""
# With the button scrolled just under the sticky tab bar, then with the beat's top there:
# the boxes (px from the viewport's top) of the button, the first chart and the beat.
LAYOUT = """([button, chart, beat]) => {
  const box = id => document.getElementById(id).getBoundingClientRect();
  const bar = () => document.querySelector('#lesson-tabs > .tab-wrapper')
    .getBoundingClientRect().bottom;
  const head = () => document.querySelector('#' + beat + ' .mech-head').getBoundingClientRect();
  window.scrollBy(0, box(button).top - bar() - 8);
  const at = {bar: bar(), button: [box(button).top, box(button).bottom],
              chart: [box(chart).top, box(chart).bottom], beat: box(beat).top,
              height: window.innerHeight};
  window.scrollBy(0, box(beat).top - bar() - 8);
  at.beat_scrolled = box(beat).top;
  at.head_scrolled = [head().top, head().bottom];
  return at; }"""


def finished_beat(page, elem_id: str, step: str) -> dict:
    """The beat once the run has drawn it (not the empty state), at beat `step`."""
    return wait_until(lambda: (b := page.evaluate(BEAT, elem_id)) and not b["empty"]
                      and b["step"] == step and b, 15, f"#{elem_id}'s measured beat")


def assert_beat_placed(page, button: str, chart: str, beat: str) -> dict:
    """What the layout promises at 1280×720: the button on screen under the tab bar, the beat
    right under the lesson's first chart (nothing between them), and the beat's head on the
    screen where the beat starts. Returns the measured boxes."""
    at = page.evaluate(LAYOUT, [button, chart, beat])
    assert at["bar"] <= at["button"][0] and at["button"][1] <= at["height"], at
    assert 0 <= at["beat"] - at["chart"][1] <= 32, at  # directly under the first chart
    assert at["bar"] <= at["head_scrolled"][0] and at["head_scrolled"][1] <= at["height"], at
    assert page.locator(f"#{beat} .mech-head").is_visible()
    return at


def shot(page, elem_id: str, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator(f"#{elem_id}").screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def test_lesson_5_beat_shows_batch_rows_sharing_one_weight_read(visitor):
    page, watch = visitor
    page.set_viewport_size(PROJECTOR)
    open_tab(page, "5 · Batching")
    assert "Press Run sweep" in text_of(page, "batch-sweep-diagram")  # says what fills it
    choose_option(page, "batch-sweep-max", "2")
    set_slider(page, "batch-sweep-btn", "Timed decode steps per batch size",
               LIMITS.sweep_decode_steps.low)
    page.locator("#batch-sweep-btn").click()
    wait_until(lambda: "✅" in text_of(page, "batch-sweep-progress"), 120, "the sweep to finish")
    beat = finished_beat(page, "batch-sweep-diagram", "2")  # the newest batch size
    assert [lane["rows"] for lane in beat["lanes"]] == [1, 2]  # batch 1 beside batch 2
    rows = {r["batch"]: r for r in table_rows(page, "batch-sweep-table")}
    for lane, batch in zip(beat["lanes"], ("1", "2")):  # each lane's time is the table's step
        step = number(r"([\d,]+) ms", rows[batch]["step (median, measured)"])
        assert lane["ms"] == pytest.approx(step, abs=0.51), (batch, lane, rows[batch])
    head = beat["head"]
    assert "Batch 2: 2 rows in one pass share one read of the weights" in head, head
    assert number(r"measured step ([\d,.]+) ms", head) == pytest.approx(beat["lanes"][1]["ms"],
                                                                       abs=0.051)
    assert number(r"= ([\d,.]+) tokens/s in total", head) == float(rows["2"]["total tokens/s"])
    assert number(r"batch 1: ([\d,.]+) ms", head) == pytest.approx(beat["lanes"][0]["ms"],
                                                                  abs=0.051)
    assert_beat_placed(page, "batch-sweep-btn", "batch-sweep-throughput", "batch-sweep-diagram")
    shot(page, "batch-sweep-diagram", "weight-beat-lesson-5")
    assert_clean(page, watch)


def test_lesson_6_beat_shows_fewer_bytes_per_weight(visitor):
    page, watch = visitor
    page.set_viewport_size(PROJECTOR)
    open_tab(page, "6 · Quantization")
    assert "Press Compare modes" in text_of(page, "quant-diagram")  # says what fills it
    modes = page.locator("#quant-modes")
    for label in ["float16", "bfloat16", "int4 weight-only (groups of 32)"]:
        modes.get_by_label(label, exact=True).uncheck()
    modes.get_by_label("int8 weight-only (per-channel scales)", exact=True).check()
    tokens = int(LIMITS.quant_new_tokens.low)
    set_slider(page, "quant-run", "Greedy tokens to compare", tokens)
    page.locator("#quant-run").click()
    wait_until(lambda: "✅" in text_of(page, "quant-progress"), 180,
               "float32 and int8 to be built and measured")
    beat = finished_beat(page, "quant-diagram", str(tokens - 1))  # the last decode step
    assert len(beat["lanes"]) == 2  # float32 beside int8
    rows = {r["mode"]: r for r in table_rows(page, "quant-table")}
    assert list(rows) == ["fp32", "int8"], rows
    for lane, key in zip(beat["lanes"], rows):  # a lane's step: 1 ÷ the measured decode speed
        assert 1000 / lane["ms"] == pytest.approx(float(rows[key]["decode (tok/s)"]), abs=0.06)
    head = beat["head"]
    assert "Every decode step reads every weight" in head, head
    assert number(r"float32: ([\d.]+) B per weight", head) == 4.0
    int8_bytes = number(r"int8 weight-only \(per-channel scales\): ([\d.]+) B per weight", head)
    assert int8_bytes == pytest.approx(4 * float(rows["int8"]["× fp32"]), abs=0.01)  # its scales
    assert number(r"scales\): [\d.]+ B per weight, ([\d,]+) MB read per step", head) == \
        pytest.approx(float(rows["int8"]["read per token (MB)"]), abs=0.6)
    assert number(r"int8 weight-only \(per-channel scales\).*?measured ([\d,.]+) ms", head) == \
        pytest.approx(beat["lanes"][1]["ms"], abs=0.051)
    assert_beat_placed(page, "quant-run", "quant-roofline", "quant-diagram")
    shot(page, "quant-diagram", "weight-beat-lesson-6")
    assert_clean(page, watch)
