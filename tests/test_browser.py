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

import pytest

from e2e_browser import (choose_option, fill_text, new_visitor, open_browser, open_tab, plot_points,
                         plot_title, screenshot, set_number, set_slider, tab_panel, table_rows,
                         text_of, toasts, wait_text_change, wait_until)
from e2e_server import shared_server

@pytest.fixture(scope="session")
def server(request):
    return shared_server(request.config)


@pytest.fixture(scope="module")
def browser():
    with open_browser() as context:
        yield context


@pytest.fixture
def visitor(server, browser):
    """A new tab on the app: (page, console watch). Closed after the test."""
    page, watch = new_visitor(browser, server.url)
    yield page, watch
    page.close()


def number(pattern: str, text: str) -> float:
    """The number captured by `pattern` in `text` (thousands separators allowed)."""
    m = re.search(pattern, text)
    assert m, f"{pattern!r} not found in {text!r}"
    return float(m.group(1).replace(",", ""))


def wait_stable(page, elem_id: str, quiet_s: float, timeout_s: float, seen: list | None = None
                ) -> str:
    """Wait until #elem_id's text stops changing for `quiet_s`; record each version seen."""
    seen = [] if seen is None else seen
    deadline, last, since = time.monotonic() + timeout_s, None, time.monotonic()
    while time.monotonic() < deadline:
        now = text_of(page, elem_id)
        if now != last:
            seen.append(now)
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return now
        time.sleep(0.2)
    raise AssertionError(f"#{elem_id} kept changing for {timeout_s} s")


def assert_clean(page, watch) -> None:
    """No error toast on screen and nothing wrong in the browser console."""
    assert toasts(page) == []
    assert watch.problems == []


def test_start_page(visitor):
    page, watch = visitor
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
    stats = wait_text_change(page, "chat-stats", before, timeout_s=60)
    assert "time to first token" in stats
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


def decode_tokens(page) -> int:
    stats = text_of(page, "decode-stats")
    return 0 if "No tokens yet" in stats else int(number(r"Tokens:\s*(\d+)", stats))


def test_lesson_3_decode(visitor):
    page, watch = visitor
    open_tab(page, "3 · Decode")
    fill_text(page, "decode-prompt", "Write one sentence about rivers.")
    assert decode_tokens(page) == 0

    page.locator("#decode-step").click()
    wait_until(lambda: decode_tokens(page) == 1, 60, "the first Step")
    stats = text_of(page, "decode-stats")
    assert number(r"Time to first token:\s*([\d,]+) ms", stats) > 0
    assert number(r"KV cache:\s*(\d+) positions", stats) > 10
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
    page.locator("#decode-pause").click()
    time.sleep(1.5)  # a tick already running may still land
    paused_at = decode_tokens(page)
    time.sleep(2.0)
    assert decode_tokens(page) == paused_at, "tokens kept coming after Pause"
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


def test_lesson_3_stop_during_play_is_final(visitor):
    page, watch = visitor
    open_tab(page, "3 · Decode")
    fill_text(page, "decode-prompt", "Count slowly from one to twenty.")
    set_slider(page, "decode-step", "Play: pause between steps (s)", 0.05)
    page.locator("#decode-play").click()
    wait_until(lambda: decode_tokens(page) >= 4, 60, "Play to add tokens")
    page.locator("#decode-stop").click()
    wait_until(lambda: "stopped by you" in text_of(page, "decode-stats"), 30, "Stop")
    # The step already running when Stop is pressed may still land (that one token is
    # test_lesson_3_stop_is_final_for_the_step_in_flight); nothing queued may run after it.
    time.sleep(1.5)
    stopped_at = decode_tokens(page)
    time.sleep(2.5)
    assert decode_tokens(page) == stopped_at, "a queued tick ran after Stop and restarted the run"
    assert "stopped by you" in text_of(page, "decode-stats")


def stop_mid_step(page) -> tuple[int, int]:
    """Play, then press Stop while a Play tick's step is running. Return (tokens on screen
    at the instant Stop was clicked, tokens on screen once everything has settled)."""
    page.locator("#decode-play").click()
    wait_until(lambda: decode_tokens(page) >= 2, 60, "Play to add tokens")
    page.wait_for_function(  # a tick just landed; the browser sends the next one within 50 ms
        """n => { const m = document.querySelector('#decode-stats').innerText
                                   .match(/Tokens:\\s*(\\d+)/);
                  return m && +m[1] > n; }""", arg=decode_tokens(page), timeout=30_000)
    time.sleep(0.08)  # ...and its step takes 100+ ms here: Stop lands inside it
    shown = page.evaluate("""() => { const t = document.querySelector('#decode-stats').innerText;
                                     document.querySelector('#decode-stop').click(); return t; }""")
    wait_until(lambda: "stopped by you" in text_of(page, "decode-stats"), 30, "Stop")
    time.sleep(1.5)
    return int(number(r"Tokens:\s*(\d+)", shown)), decode_tokens(page)


def test_lesson_3_stop_is_final_for_the_step_in_flight(visitor):
    page, watch = visitor
    open_tab(page, "3 · Decode")
    fill_text(page, "decode-prompt", "Count slowly from one to twenty.")
    set_slider(page, "decode-step", "Play: pause between steps (s)", 0.05)
    for _ in range(3):  # Play after a stopped run starts a fresh one
        at_click, final = stop_mid_step(page)
        assert final == at_click, f"{at_click} tokens shown when Stop was pressed, {final} after"
    assert_clean(page, watch)


def test_lesson_4_kv_cache(visitor):
    page, watch = visitor
    open_tab(page, "4 · KV cache")

    # 1 · Watch it grow: a few tokens; the formula and the real tensors agree at every step.
    set_slider(page, "kv-growth-btn", "New tokens", 4)
    formulas: list[str] = []

    def four_steps_drawn() -> bool:  # and remember every formula shown on the way
        formulas.append(text_of(page, "kv-formula"))
        return plot_points(page, "kv-growth-bytes") >= 8  # 2 traces x 4 steps

    page.locator("#kv-growth-btn").click()
    wait_until(lambda: "cache holds" in text_of(page, "kv-growth-text"), 60, "the first cache step")
    wait_until(four_steps_drawn, 90, "4 steps of cache bytes")
    text, formula = text_of(page, "kv-growth-text"), text_of(page, "kv-formula")
    prompt_tokens = int(number(r"\((\d+) prompt \+", text))
    assert number(r"cache holds (\d+) tokens", text) == prompt_tokens + 3  # lags the text by one
    assert number(r"(\d+) generated", text) == 3
    tokens = number(r"× ([\d,]+) tokens", formula)
    per_value = number(r"× (\d) bytes", formula)
    formula_bytes = number(r"= ([\d,]+) bytes", formula)
    real_bytes = number(r"real tensors hold ([\d,]+) bytes", formula)
    assert tokens == prompt_tokens + 3
    assert formula_bytes == real_bytes == 2 * 30 * 3 * 64 * per_value * tokens
    assert "equal" in formula
    seen_bytes = {number(r"= ([\d,]+) bytes", f) for f in formulas if "= " in f}
    assert len(seen_bytes) >= 2, f"the formula never changed while the cache grew: {formulas}"
    assert plot_title(page, "kv-growth-bytes") == "Cache size grows by the same bytes with every token"
    assert plot_title(page, "kv-growth-grid").startswith("The real KV cache: 30 layers")
    screenshot(page, "lesson-4-kv-growth")

    # 2 · Race: 4 tokens with and without the cache; same tokens, far more work without.
    open_tab(page, "2 · Race: cache on vs off")
    set_slider(page, "kv-race-btn", "New tokens", 4)
    before = text_of(page, "kv-race-summary")
    page.locator("#kv-race-btn").click()
    wait_until(lambda: "Step 4 of 4" in text_of(page, "kv-race-progress"), 90, "the race to finish")
    summary = wait_text_change(page, "kv-race-summary", before, timeout_s=10)
    assert number(r"Measured over (\d+) new tokens", summary) == 4
    assert number(r"with cache ([\d.]+) s", summary) > 0
    assert number(r"recomputing ([\d.]+) s", summary) > 0
    assert re.search(r"made it [\d.]+× faster|was slower this time \([\d.]+×\)", summary), summary
    cached_work, recompute_work = (number(r"Work: ([\d,]+) vs", summary),
                                   number(r"vs ([\d,]+) tokens through", summary))
    assert recompute_work > 3 * cached_work
    assert "the same greedy tokens in both lanes" in summary
    wait_until(lambda: plot_points(page, "kv-race-plot") >= 16, 10, "the race chart")
    assert plot_title(page, "kv-race-plot") == "Cache on vs off: time for each new token"
    screenshot(page, "lesson-4-kv-race")

    # 3 · Memory projection: switching bytes per value redraws charts and table (theoretical).
    open_tab(page, "3 · Memory projection")
    titles = [plot_title(page, "kv-projection-context"), plot_title(page, "kv-projection-batch")]
    assert titles[0].startswith("KV cache vs context length (theoretical, 2 bytes per value")
    assert titles[1].startswith("KV cache vs batch size (theoretical, 2 bytes per value")
    assert plot_title(page, "kv-projection-gqa").startswith("Cache bytes per token: grouped-query")
    table = text_of(page, "kv-projection-table")
    tab_panel(page, "kv-projection-table").get_by_text("fp32 (4 bytes)", exact=True).click()
    wait_until(lambda: "4 bytes per value" in (plot_title(page, "kv-projection-context") or ""),
               30, "the projection to redraw for 4 bytes per value")
    assert "4 bytes per value" in plot_title(page, "kv-projection-batch")
    assert "4 bytes per value" in wait_text_change(page, "kv-projection-table", table, 30)
    screenshot(page, "lesson-4-kv-projection")

    # 4 · Prefix reuse: one question, a few answer tokens; TTFT both ways, same tokens.
    open_tab(page, "4 · Prefix reuse")
    fill_text(page, "kv-prefix-questions", "When does the museum close?")
    set_slider(page, "kv-prefix-btn", "Answer tokens", 4)
    page.locator("#kv-prefix-btn").click()
    rows = wait_until(lambda: table_rows(page, "kv-prefix-text"), 90, "the prefix reuse table")
    assert len(rows) == 1, rows
    row = rows[0]
    assert row["question"] == "When does the museum close?"
    assert 0 < number(r"(\d+)", row["reused"]) < number(r"(\d+)", row["prompt tokens"])
    assert number(r"([\d,]+) ms", row["TTFT full"]) > 0
    assert number(r"([\d,]+) ms", row["TTFT reused"]) > 0
    assert row["tokens"] == "✓ same"
    assert row["answer"].strip("'\"")
    head = text_of(page, "kv-prefix-text")
    assert number(r"Shared prefix: (\d+) tokens", head) == number(r"(\d+)", row["reused"])
    wait_until(lambda: plot_points(page, "kv-prefix-plot") == 2, 10, "the TTFT bars")
    assert plot_title(page, "kv-prefix-plot").startswith("Time to first token, with and without")
    screenshot(page, "lesson-4-kv-prefix")

    # 5 · Attention: the newest token's weights; moving the sliders redraws layer and head.
    open_tab(page, "5 · What the cache is read for")
    set_slider(page, "kv-attn-btn", "New tokens first", 2)
    page.locator("#kv-attn-btn").click()
    wait_until(lambda: "layer 0, query head 0 (KV head 0)" in (plot_title(page, "kv-attn-plot") or ""),
               60, "the attention chart")
    set_slider(page, "kv-attn-btn", "Layer", 5)
    set_slider(page, "kv-attn-btn", "Query head", 4)
    wait_until(lambda: "layer 5, query head 4 (KV head 1)" in (plot_title(page, "kv-attn-plot") or ""),
               30, "the chart to show layer 5, head 4 (3 query heads share each KV head)")
    screenshot(page, "lesson-4-kv-attention")
    assert_clean(page, watch)


def test_lesson_5_batching(visitor):
    page, watch = visitor
    open_tab(page, "5 · Batching")

    # 1 · Batch sweep: batch sizes 1, 2, 4 with a few timed steps each.
    choose_option(page, "batch-sweep-max", "4")
    set_slider(page, "batch-sweep-btn", "Timed decode steps per batch size", 4)
    closing0 = text_of(page, "batch-closing")
    page.locator("#batch-sweep-btn").click()
    wait_until(lambda: "✅" in text_of(page, "batch-sweep-progress"), 120, "the sweep to finish")
    progress = text_of(page, "batch-sweep-progress")
    assert "3 batch sizes measured" in progress, progress
    sweep = table_rows(page, "batch-sweep-table")
    assert [r["batch"] for r in sweep] == ["1", "2", "4"], sweep
    rates = [float(r["total tokens/s"]) for r in sweep]
    assert all(r > 0 for r in rates)
    for r in sweep:
        assert number(r"([\d,]+) ms", r["step (median, measured)"]) > 0
    assert "Why." in text_of(page, "batch-sweep-table")
    wait_until(lambda: plot_points(page, "batch-sweep-throughput") == 9, 10, "the throughput chart")
    assert plot_title(page, "batch-sweep-throughput") == "Decode throughput grows with batch size"
    assert plot_title(page, "batch-sweep-steptime").startswith("One step serves the whole batch")
    closing = wait_text_change(page, "batch-closing", closing0, 10)
    assert number(r"([\d.]+) tokens/s at batch 1", closing) == rates[0]
    assert number(r"([\d.]+) tokens/s at batch 4", closing) == rates[-1]
    screenshot(page, "lesson-5-batch-sweep")

    # 2 · Padding: a short and a long prompt; most of the short row is filler.
    open_tab(page, "2 · Padding")
    pad0 = text_of(page, "batch-pad-text")
    fill_text(page, "batch-pad-prompts", "Hi\nPlease describe, in a few careful sentences, how a "
              "river carves a canyon over millions of years.")
    page.locator("#batch-pad-btn").click()
    pad = wait_text_change(page, "batch-pad-text", pad0, 30)
    assert "these 2 prompts" in pad
    total, padded = number(r"computes (\d+) positions", pad), number(r"of which (\d+) are padding", pad)
    assert total % 2 == 0 and 10 < padded < total / 2
    wait_until(lambda: plot_title(page, "batch-pad-plot") ==
               f"Padding: {padded:.0f} of {total:.0f} positions are filler ({padded / total:.0%})",
               10, "the padding chart to redraw")
    screenshot(page, "lesson-5-padding")

    # 3 · Static vs continuous on a tiny seeded trace: 2 short requests, max batch 2.
    open_tab(page, "3 · Static vs continuous")
    choose_option(page, "batch-sched-workload", "Random (seeded)")
    seed = tab_panel(page, "batch-sched-btn").get_by_label("Seed (random trace)", exact=True)
    seed.fill("7")
    seed.blur()
    set_slider(page, "batch-sched-btn", "Requests (random trace)", 2)
    set_slider(page, "batch-sched-btn", "Arrivals per second (random trace)", 8)
    set_slider(page, "batch-sched-btn", "Max batch", 2)
    set_slider(page, "batch-sched-btn", "Static: wait up to (s) for a batch to fill", 0)
    page.locator("#batch-sched-btn").click()
    wait_until(lambda: "✅" in text_of(page, "batch-sched-progress"), 120, "both schedulers to finish")
    sched = table_rows(page, "batch-sched-table")
    assert [r["scheduler"] for r in sched] == ["static", "continuous"], sched
    for r in sched:
        assert float(r["tokens/s"]) > 0
        assert number(r"([\d.]+) s", r["mean latency"]) > 0
        assert int(r["forward passes"]) >= 2
    table = text_of(page, "batch-sched-table")
    assert "from 2 requests" in table and "exactly the same tokens" in table, table
    assert plot_title(page, "batch-sched-static") == "Static batching (max batch 2)"
    assert plot_title(page, "batch-sched-continuous") == "Continuous batching (max batch 2)"
    assert plot_title(page, "batch-sched-summary").startswith("Static vs continuous")
    assert "Random (seeded), seed 7, 2 requests" in text_of(page, "batch-closing")
    screenshot(page, "lesson-5-schedulers")

    # 4 · Cost: filled from the sweep; ten times the price, ten times the cost.
    open_tab(page, "4 · Cost per request")
    costs = wait_until(lambda: table_rows(page, "batch-cost-table"), 10, "the cost table")
    assert [r["batch"] for r in costs] == ["1", "2", "4"]
    assert [float(r["output tokens/s (measured)"]) for r in costs] == rates
    dollars = [number(r"\$([\d,.]+)", r["$ / M output"]) for r in costs]
    # $ per million = price per hour / (tokens/s x 3,600) x 1,000,000, at the default $0.10/h
    assert dollars == pytest.approx([0.10 / (r * 3600) * 1e6 for r in rates], rel=0.02)
    before = text_of(page, "batch-cost-table")
    set_number(page, "batch-cost-price", 1.0)
    wait_text_change(page, "batch-cost-table", before, 30)
    tenfold = [number(r"\$([\d,.]+)", r["$ / M output"]) for r in table_rows(page, "batch-cost-table")]
    assert tenfold == pytest.approx([10 * d for d in dollars], rel=0.01)
    assert plot_title(page, "batch-cost-plot") == "What a token costs at $1.00 per hour"
    screenshot(page, "lesson-5-cost")
    assert_clean(page, watch)


def test_lesson_6_quantization(visitor):
    page, watch = visitor
    open_tab(page, "6 · Quantization")
    modes = page.locator("#quant-modes")
    for label in ["float16", "bfloat16", "int4 weight-only (groups of 32)"]:
        modes.get_by_label(label, exact=True).uncheck()
    modes.get_by_label("int8 weight-only (per-channel scales)", exact=True).check()
    set_slider(page, "quant-run", "Greedy tokens to compare", 8)
    assert plot_points(page, "quant-bars") == 0
    page.locator("#quant-run").click()
    wait_until(lambda: "✅" in text_of(page, "quant-progress"), 150, "int8 to be built and measured")
    progress = text_of(page, "quant-progress")
    assert "measured 2 modes" in progress and "8 greedy tokens" in progress, progress

    rows = {r["mode"]: r for r in table_rows(page, "quant-table")}
    assert list(rows) == ["fp32", "int8"], rows
    fp32, int8 = rows["fp32"], rows["int8"]
    assert float(fp32["× fp32"]) == 1.0
    assert 0.2 < float(int8["× fp32"]) < 0.5  # 1 byte per weight plus scales, vs 4
    assert float(int8["weights (MB)"]) == pytest.approx(float(fp32["weights (MB)"])
                                                        * float(int8["× fp32"]), rel=0.01)
    for r in (fp32, int8):
        assert float(r["decode (tok/s)"]) > 0
        assert float(r["prefill (ms)"]) > 0
        assert 1 < float(r["perplexity"]) < 1000
    assert float(fp32["top-1 agree (%)"]) == 100.0 and float(fp32["KL (nats)"]) == 0.0
    assert 50 <= float(int8["top-1 agree (%)"]) <= 100
    assert float(int8["KL (nats)"]) >= 0

    texts = text_of(page, "quant-texts")
    assert "fp32 (float32 (as loaded); identical to fp32)" in texts, texts
    assert re.search(r"int8 \(int8 weight-only \(per-channel scales\); (identical to fp32|first "
                     r"differs at token \d+ of 8)\)", texts), texts
    assert page.locator("#quant-texts .q6-card").count() == 2
    closing = text_of(page, "quant-closing")
    assert number(r"int8: \d+ MB \([\d.]+× fp32\), decode ([\d.]+) tokens/s", closing) == \
        pytest.approx(float(int8["decode (tok/s)"]), abs=0.06)
    wait_until(lambda: plot_points(page, "quant-bars") > 0, 10, "the per-mode bars")
    assert plot_title(page, "quant-roofline").startswith("Fewer bytes per token, faster decode")
    assert plot_title(page, "quant-bars") == "Each precision mode: size, speed and quality"
    screenshot(page, "lesson-6-quantization")
    assert_clean(page, watch)
