"""In a real browser: links to a prepared state (`?lesson=kv&prompt=…`, a bad link's notice),
the lesson path remembered across a reload, and every chart's CSV export equal to the numbers
the chart draws."""
from __future__ import annotations

import csv
from pathlib import Path
from urllib.parse import quote

from e2e_browser import (
    app_base,
    assert_clean,
    assert_clean_after_navigation,
    goto,
    open_tab,
    set_slider,
    settled_value,
    tab_panel,
    text_of,
    wait_until,
)
from lessons.common.progress import STEPS


def test_link_opens_kv_with_the_prompt(visitor, server):
    page, watch = visitor
    prompt = "Why do cats purr when they are happy?"
    goto(page, f"{app_base(server)}?lesson=kv&prompt={quote(prompt)}")
    wait_until(lambda: page.locator("#kv-growth-prompt textarea").input_value() == prompt, 30,
               "the KV prompt filled from the link")
    assert page.get_by_role("tab", name="4 · KV cache", exact=True).get_attribute(
        "aria-selected") == "true"
    assert page.locator("#kv-growth-prompt").is_visible()
    assert page.locator("#link-notice").is_hidden()
    assert_clean_after_navigation(page, watch)


def test_bad_links_show_a_notice(visitor, server):
    page, watch = visitor
    goto(page, f"{app_base(server)}?lesson=nowhere&prompt=hello")
    wait_until(lambda: "does not exist" in text_of(page, "link-notice"), 30, "the notice")
    assert page.get_by_role("tab", name="Start here", exact=True).get_attribute(
        "aria-selected") == "true"

    goto(page, f"{app_base(server)}?lesson=prefill&prompt={'x' * 20_001}")
    wait_until(lambda: "over this app's limit" in text_of(page, "link-notice"), 30,
               "the oversized-prompt notice")
    assert page.get_by_role("tab", name="2 · Prefill", exact=True).get_attribute(
        "aria-selected") == "true"
    assert "x" * 100 not in page.locator("#prefill-prompt textarea").input_value()
    assert_clean_after_navigation(page, watch)


def test_prefill_sweep_csv_matches_the_chart(visitor, server, tmp_path):
    page, watch = visitor
    page.get_by_role("tab", name="2 · Prefill", exact=True).click()
    panel = tab_panel(page, "prefill-sweep")
    for n in ("32", "128", "512"):
        panel.get_by_label(n, exact=True).uncheck()
    set_slider(page, "prefill-sweep", "Measure one-at-a-time up to (tokens); longer is "
               "extrapolated", 8)
    page.locator("#prefill-sweep").click()
    wait_until(lambda: page.locator("#prefill-csv").is_visible(), 180, "the CSV button")
    with page.expect_download() as info:
        page.locator("#prefill-csv").click()
    path = Path(tmp_path) / "sweep.csv"
    info.value.save_as(path)
    rows = list(csv.DictReader(path.open()))
    assert [int(r["prompt_tokens"]) for r in rows] == [1, 8]
    wanted = {(int(r["prompt_tokens"]), round(float(r[col]), 4))
              for r in rows for col in ("one_pass_ms", "one_at_a_time_ms")}

    def drawn_now() -> list[dict]:  # the chart's last frame can be drawn after the button shows
        return page.evaluate("""() => {
            const g = document.querySelector('#prefill-chart .js-plotly-plot');
            return g.data.map(t => ({name: t.name, x: t.x, y: t.y})); }""")

    def points_of(drawn: list[dict]) -> set:
        return {(int(x), round(float(y), 4)) for t in drawn for x, y in zip(t["x"], t["y"])}

    drawn = settled_value(drawn_now, lambda d: wanted <= points_of(d))
    points = points_of(drawn)
    for r in rows:
        for col in ("one_pass_ms", "one_at_a_time_ms"):
            assert (int(r["prompt_tokens"]), round(float(r[col]), 4)) in points, (r, drawn)
    # Plotly's own toolbar downloads the chart as a PNG.
    page.locator("#prefill-chart .js-plotly-plot").hover()
    assert page.locator('#prefill-chart .modebar-btn[data-title^="Download plot as"]').count()
    assert_clean(page, watch)


def test_lesson_path_is_remembered_across_a_reload(visitor, server):
    """Lessons opened by a tap or by "Next lesson" are ticked on "Start here", and
    the ticks come back after a reload (the browser's own storage, nothing on the server)."""
    page, watch = visitor
    goto(page, app_base(server))
    # Visitors of earlier tests share this browser's storage: start from an empty path.
    page.evaluate("() => localStorage.removeItem('llm-lab-progress')")
    goto(page, app_base(server))
    wait_until(lambda: "in this browser only" in text_of(page, "start-progress"), 15, "the line")
    assert "✓" not in text_of(page, "start-progress")
    open_tab(page, "1 · Tokens")
    next_button = page.locator("#next-tokens")  # to 2 · Prefill without tapping its tab
    next_button.scroll_into_view_if_needed()
    next_button.click()
    open_tab(page, "Start here")
    wait_until(lambda: f"(2 of {len(STEPS)}," in text_of(page, "start-progress"), 15,
               "two lessons ticked")
    line = text_of(page, "start-progress")
    assert "✓ 1 · Tokens" in line and "✓ 2 · Prefill" in line and "○ 3 · Decode" in line

    goto(page, app_base(server))
    wait_until(lambda: f"(2 of {len(STEPS)}," in text_of(page, "start-progress"), 30,
               "the remembered path")
    assert "Next: Try it" in text_of(page, "start-progress")
    assert_clean_after_navigation(page, watch)


def test_every_chart_gives_its_drawn_points_as_csv(visitor, server, tmp_path):
    """Every chart's data as CSV. Each drawn chart has the button; the file holds
    exactly the points the chart draws (here lesson 4's projection, drawn without a run)."""
    page, watch = visitor
    open_tab(page, "4 · KV cache")
    page.get_by_role("tab", name="3 · Memory projection", exact=True).click()
    chart = page.locator("#kv-projection-context")
    wait_until(lambda: chart.locator(".lab-csv").count() == 1, 30, "the chart's CSV button")
    with page.expect_download() as info:
        chart.locator(".lab-csv").click()
    path = Path(tmp_path) / "chart.csv"
    info.value.save_as(path)
    assert info.value.suggested_filename.endswith(".csv")
    rows = list(csv.DictReader(path.open()))
    drawn = page.evaluate("""() => {
        const g = document.querySelector('#kv-projection-context .js-plotly-plot');
        return g.data.flatMap(t => (t.x || []).map((x, k) =>
            [(t.name || '').replace(/<br>/g, ' '), String(x), String(t.y[k])])); }""")
    assert len(rows) == len(drawn) > 0
    assert [(r["trace"], r["x"], r["y"]) for r in rows] == [tuple(d) for d in drawn]
    # every drawn chart on a page gets one button, and only one
    charts = page.evaluate("""() => Array.from(document.querySelectorAll('.js-plotly-plot'))
        .filter(g => (g.data || []).length && g.getBoundingClientRect().width > 0)
        .map(g => g.parentElement.querySelectorAll(':scope > .lab-csv').length)""")
    assert charts and set(charts) == {1}, charts
    assert_clean(page, watch)


# Where a presenter screen's parts are (viewport px), and whether the tab strip is shown.
