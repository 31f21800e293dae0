"""Lesson 4 figure builders on hand-made data: the traces carry exactly the numbers given."""
from chart_reading import caption_text
from inference.experiments.attention_view import AttentionView
from inference.experiments.kv_projection import ModelSpec, project_batch, project_context
from inference.experiments.kv_race import PrefixRun, RaceStep, summarize
from inference.experiments.noise import judge
from inference.kv_cache import CacheSnapshot
from visualizations import kv_charts, kv_text

QUIET = judge(spread=0.04, calibration_ratio=1.05, others_cpu=0.02)  # hand-made readings
BUSY = judge(spread=0.04, calibration_ratio=1.05, others_cpu=0.6)


def _snap(tokens=4, layers=2, batch=1):
    return CacheSnapshot(
        layers=layers, batch=batch, kv_heads=3, tokens=tokens, head_dim=64, dtype="float32",
        bytes_per_value=4, tensor_bytes=2 * layers * 3 * 64 * 4 * tokens * batch,
        shapes=tuple((batch, 3, tokens, 64) for _ in range(layers)),
        key_norms=tuple(tuple(float(n * 10 + p) for p in range(tokens)) for n in range(layers)))


def test_cache_grid_draws_one_column_per_token():
    fig = kv_charts.cache_grid_figure(_snap(tokens=4), prompt_tokens=3)
    heat = fig.data[0]
    assert [list(r) for r in heat.z] == [[0, 1, 2, 3], [10, 11, 12, 13]]
    assert list(heat.x) == [0, 1, 2, 3] and list(heat.y) == [0, 1]
    title = caption_text(fig)
    assert "[1, 3, 4, 64]" in title
    # coloured by keys alone, so the title says so (not "keys and values")
    assert "colour: each key's length" in title and fig.data[0].colorbar.title.text == "|key|"
    assert fig.layout.shapes[0].x0 == 2.5  # the prompt | generated boundary


def test_cache_grid_empty_state():
    empty = CacheSnapshot(0, 0, 0, 0, 0, "", 0, 0, (), ())
    fig = kv_charts.cache_grid_figure(empty, 0)
    assert not fig.data and "Generate" in fig.layout.annotations[0].text


def test_formula_markdown_fills_in_the_numbers():
    text = kv_text.formula_markdown(_snap(tokens=5, layers=30, batch=2))
    assert ("2 (K and V) × 30 layers × 3 KV heads × 64 dims × 4 bytes (float32) × 5 tokens × "
            "2 sequences") in text
    assert "= 460,800 bytes" in text and "✓ equal" in text and "46,080 bytes per token" in text
    broken = CacheSnapshot(30, 1, 3, 5, 64, "float32", 4, 1, (), ())
    assert "✗ different" in kv_text.formula_markdown(broken)


def test_cache_bytes_figure_plots_formula_and_tensors():
    fig = kv_charts.cache_bytes_figure([(10, 100, 100), (11, 110, 110)])
    formula, real = fig.data
    assert list(formula.x) == [10, 11] and list(formula.y) == [100, 110]
    assert list(real.y) == [100, 110]
    assert "theoretical" in formula.name and "measured" in real.name


def _race_steps():
    steps = []
    for i in range(3):
        steps.append(RaceStep(i, "cached", 7, 10 if i == 0 else 1, 10 + i, 0.1))
        steps.append(RaceStep(i, "recompute", 7, 10 + i, 10 + i, 0.1 * (i + 1), logit_gap=1e-5))
    return steps


def test_race_figure_and_summary():
    steps = _race_steps()
    fig = kv_charts.race_figure(steps)
    cached_ms, cached_work, plain_ms, plain_work = fig.data
    assert [round(y) for y in cached_ms.y] == [100, 100, 100]
    assert [round(y) for y in plain_ms.y] == [100, 200, 300]
    assert list(cached_work.y) == [10, 1, 1] and list(plain_work.y) == [10, 11, 12]
    summary = summarize(steps, prompt_tokens=10)
    assert abs(summary.speedup - 2.0) < 1e-9 and summary.same_tokens
    text = kv_text.race_summary_markdown(summary, QUIET)
    assert "**2.0× faster**" in text and "12 vs 33 tokens" in text and "2.8× more" in text
    assert "busy" not in text
    # while running (no noise judged yet) and on a busy machine: the numbers, no verdict
    running = kv_text.race_summary_markdown(summary)
    assert "faster" not in running and "after the last step" in running and "2.0×" in running
    busy = kv_text.race_summary_markdown(summary, BUSY)
    assert "faster" not in busy and "numbers are noisy — run again" in busy
    assert "other programs used 60%" in busy and "2.0×" in busy


def test_race_summary_counts_only_finished_pairs_and_says_when_slower():
    steps = _race_steps()[:3]  # stopped after the cached lane's second step
    summary = summarize(steps, 10)
    assert summary.new_tokens == 1
    slow = summarize([RaceStep(0, "cached", 1, 5, 5, 0.2),
                      RaceStep(0, "recompute", 1, 5, 5, 0.1)], 5)
    assert "slower" in kv_text.race_summary_markdown(slow, QUIET)
    assert "slower" not in kv_text.race_summary_markdown(slow, BUSY)
    assert "Press **Race**" in kv_text.race_summary_markdown(summarize([], 5))
    assert kv_text.race_progress_markdown(3, 4) == "Step 4 of 4 · both lanes ran it"


def test_projection_figures_use_log_axes_and_weight_lines():
    a = ModelSpec("A", 2, 4, 2, 8, 1000, "test")
    b = ModelSpec("B", 4, 4, 4, 8, 5000, "test")
    proj = project_context([a, b], [1, 2, 4], batch=1, bytes_per_value=2)
    fig = kv_charts.projection_figure(proj, highlight="A")
    assert [t.name for t in fig.data] == ["A KV cache", "A weights", "B KV cache", "B weights"]
    # 2 × 2 layers × 2 heads × 8 dims × 2 bytes = 128 bytes per token
    assert list(fig.data[0].y) == [128, 256, 512]
    assert list(fig.data[1].y) == [2000, 2000]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "1.0 KB" in fig.layout.yaxis.ticktext  # byte units on the axis, not SI "B" = billion
    by_batch = kv_charts.projection_figure(project_batch([b], [1, 3], tokens=10, bytes_per_value=1))
    assert list(by_batch.data[0].y) == [2560, 7680]  # 256 bytes per token × 10 tokens × batch


def test_gqa_and_prefix_figures():
    fig = kv_charts.gqa_figure([("GQA", 23_040), ("MHA", 69_120)])
    assert list(fig.data[0].y) == [23_040, 69_120] and list(fig.data[0].x) == ["GQA", "MHA"]
    runs = [PrefixRun("Q1?", 100, 90, 0.5, 0.1, (1, 2), (1, 2), "ok")]
    fig = kv_charts.prefix_figure(runs)
    full, reuse = fig.data
    assert list(full.y) == [500] and list(reuse.y) == [100]
    assert list(reuse.text) == ["10 tokens"] and runs[0].speedup == 5.0 and runs[0].same
    assert not kv_charts.prefix_figure([]).data


def test_attention_figure_shows_one_head():
    view = AttentionView(pieces=("a", "b", "c"), kv_heads=1, query_heads=2,
                         weights=(((0.2, 0.3, 0.5), (1.0, 0.0, 0.0)),))
    fig = kv_charts.attention_figure(view, layer=0, head=1)
    assert list(fig.data[0].y) == [1.0, 0.0, 0.0]
    assert list(fig.layout.xaxis.ticktext) == ["a", "b", "c"]
    assert "KV head 0" in caption_text(fig)


def test_growth_step_text():
    from inference.experiments.attention_view import GrowthStep
    step = GrowthStep(index=0, piece="A", text="A", prompt_tokens=3, seconds=0.0425,
                      cache=_snap(tokens=3), finished=None)
    text = kv_text.growth_step_markdown(step)
    assert text.startswith("**Step 0** (prefill of the prompt, 42 ms): cache holds **3 tokens**")
    assert "(3 prompt + 0 generated) · 9.2 KB" in text and "*Output so far:* 'A'" in text
    later = GrowthStep(2, "C", "ABC", 3, 0.01, _snap(tokens=5), None)
    assert "(one decode step, 10 ms)" in kv_text.growth_step_markdown(later)
    assert "(3 prompt + 2 generated)" in kv_text.growth_step_markdown(later)
    # the text is one token ahead of the cache, and the lesson says why, under the cache grid
    # (lessons/kv_cache_panel.py), not in every step's line (it would push the grid off a phone)
    assert "one token behind the text" in kv_text.LAG_NOTE
    assert "written by the next forward pass" in kv_text.LAG_NOTE and kv_text.LAG_NOTE not in text


def test_projection_table_rows():
    a = ModelSpec("A", 2, 4, 2, 8, 1000, "test", context_window=16)
    b = ModelSpec("B", 4, 4, 4, 8, 5000, "test", context_window=8, sliding_window=4)
    text = kv_text.projection_table_markdown([a, b], {"A": 8, "B": 10}, a, 2, batch=3,
                                             context_window=8192)
    rows = [line for line in text.splitlines() if line.startswith("| A") or line.startswith("| B")]
    assert rows == [
        "| A | GQA | 2 / 4 | 128 B | 2.0 KB | 16 tokens | 8 tokens × 3 sequence(s) |",
        "| B | MHA | 4 / 4 | 512 B | 10.0 KB | 8 tokens, 4-token sliding window | "
        "10 tokens × 3 sequence(s) (beyond its context window) |"]
    assert "*Theoretical, 2 bytes per value" in text and "among 2 query heads" in text
    assert "2× smaller" in text and "8,192 tokens" in text
    assert "B attends over a 4-token sliding window" in text


def test_projection_marks_points_beyond_each_context_window():
    """No model's cache is drawn past its context window as if supported."""
    short = ModelSpec("Short", 2, 4, 2, 8, 1000, "test", context_window=4)
    free = ModelSpec("Free", 2, 4, 2, 8, 1000, "test")  # window unknown: all solid
    proj = project_context([short, free], [1, 2, 4, 8, 16], batch=1, bytes_per_value=2)
    assert proj.within == ((True, True, True, False, False), (True,) * 5)
    fig = kv_charts.projection_figure(proj)
    names = [t.name for t in fig.data]
    assert names == ["Short KV cache", "Short: beyond its context window (4 tokens)",
                     "Short weights", "Free KV cache", "Free weights"]
    solid, beyond = fig.data[0], fig.data[1]
    assert list(solid.x) == [1, 2, 4] and solid.line.dash is None
    assert list(beyond.x) == [4, 8, 16] and beyond.line.dash == "dot"  # joined at the window
    by_batch = kv_charts.projection_figure(project_batch([short], [1, 2], tokens=8))
    assert [t.name for t in by_batch.data][0] == "Short: beyond its context window (4 tokens)"


def test_published_models_carry_their_context_windows():
    from inference.experiments.kv_projection import PUBLISHED
    windows = {s.name: (s.context_window, s.sliding_window) for s in PUBLISHED}
    assert windows == {"Llama-2-7B": (4096, None), "Mistral-7B": (8192, 4096),
                       "Llama-3-8B": (8192, None), "Llama-3-70B": (8192, None)}
    assert not any(s.supports(131_072) for s in PUBLISHED)


def test_prefix_text_table():
    runs = [PrefixRun("Q1?", 100, 90, 0.5, 0.1, (1, 2), (1, 2), "ok"),
            PrefixRun("Q2?", 104, 90, 0.4, 0.2, (1, 2), (1, 3), "no")]
    head = kv_text.prefix_markdown(90, 0.25, 2048, [])
    assert head == ("Shared prefix: **90 tokens**, prefilled once in **250 ms** (2.0 KB of cache, "
                    "kept for every question).")
    text = kv_text.prefix_markdown(90, 0.25, 2048, runs)
    assert text.startswith(head)
    assert "| Q1? | 100 | 90 | 500 ms | 100 ms | 5.0× | ✓ same | 'ok' |" in text
    assert "| Q2? | 104 | 90 | 400 ms | 200 ms | 2.0× | ✗ differ | 'no' |" in text


def test_every_empty_chart_names_the_button_that_fills_it():
    """No chart of lesson 4 is a bare icon: each empty one says what will
    appear and which button draws it (the button's own label)."""
    for fig, button in [(kv_charts.cache_grid_figure(None, 0), "Generate and watch the cache"),
                        (kv_charts.cache_bytes_figure([]), "Generate and watch the cache"),
                        (kv_charts.race_figure([]), "Race"),
                        (kv_charts.prefix_figure([]), "Run both ways")]:
        (note,) = fig.layout.annotations
        assert button in note.text and "appear" in note.text, note.text
