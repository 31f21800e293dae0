"""Lesson 5 figure builders on hand-made data: the values drawn, not just "a Figure"."""
from types import SimpleNamespace

import pytest

from chart_reading import caption_text
from inference.experiments.batch_sweep import BatchPoint
from inference.experiments.schedulers import (
    RequestRecord,
    ScheduleResult,
    SchedulerPass,
    ScheduleSummary,
)
from inference.experiments.serving_cost import serving_costs
from visualizations import batching_charts as charts

W = 500_000_000  # weight bytes


def _points():
    # batch, prompt, prefill s, median step s, step times, cache bytes, weights
    return [BatchPoint(1, 10, 0.1, 0.100, (0.1,), 0, W),
            BatchPoint(4, 10, 0.2, 0.125, (0.125,), 1_000_000_000, W),
            BatchPoint(16, 10, 0.5, 0.200, (0.2,), 2_000_000_000, W)]


def test_throughput_chart_values():
    fig = charts.throughput_chart(_points(), "cap")
    total, per_request, perfect = fig.data
    assert list(total.x) == [1, 4, 16]
    assert list(total.y) == pytest.approx([10, 32, 80])
    assert list(per_request.y) == pytest.approx([10, 8, 5])
    assert list(perfect.y) == pytest.approx([10, 40, 160])
    assert "measured" in total.name and "theoretical" in perfect.name
    assert fig.layout.xaxis.type == "log" and list(fig.layout.xaxis.tickvals) == [1, 4, 16]


def test_throughput_title_comes_from_the_data_and_the_noise():
    from dataclasses import replace

    from inference.experiments.noise import judge

    quiet, busy = judge(spread=0.03, others_cpu=0.02), judge(others_cpu=0.6)
    rising = _points()
    falling = [replace(p, step_seconds=p.batch * 0.05 * (1 + i)) for i, p in enumerate(rising)]
    assert caption_text(charts.throughput_chart(rising, "cap", quiet)).startswith(
        "Decode throughput grows with batch size.")
    assert "fell" in charts.throughput_title(falling, quiet)  # 20 -> 10 -> 5.3 tokens/s
    assert "grows" not in charts.throughput_title(rising, busy)
    assert "busy" in charts.throughput_title(rising, busy)
    assert charts.throughput_title(rising) == "Decode throughput against batch size"  # running
    from visualizations import batching_text as text

    note = text.closing_note(_info(), SimpleNamespace(points=rising), None, busy)
    assert "numbers are noisy — run again" in note and "No verdict" in note
    assert "stops paying" not in note.replace("where batching stops paying from", "")


def test_step_time_chart_shows_floor_from_bandwidth():
    fig = charts.step_time_chart(_points(), bandwidth_gbs=10.0)
    bars, floor, linear = fig.data
    assert list(bars.x) == ["1", "4", "16"] and list(bars.y) == pytest.approx([100, 125, 200])
    # (weights + KV cache bytes) / 10 GB/s, in ms
    assert list(floor.y) == pytest.approx([50, 150, 250])
    assert list(linear.y) == pytest.approx([100, 400, 1600])
    assert "10.0 GB/s" in floor.name and "theoretical" in floor.name


def test_tradeoff_chart():
    fig = charts.tradeoff_chart(_points())
    (curve,) = fig.data
    assert list(curve.x) == pytest.approx([100, 125, 200])
    assert list(curve.y) == pytest.approx([10, 32, 80])
    assert list(curve.text) == ["B=1", "B=4", "B=16"]


def test_padding_chart_marks_left_padding():
    fig = charts.padding_chart([3, 1], ["a", "b"])
    (heat,) = fig.data
    assert [list(r) for r in heat.z] == [[1, 1, 1], [0, 0, 1]]
    assert list(heat.y) == ["row 1 · 3 tokens", "row 2 · 1 tokens"]
    assert heat.customdata[1][0] == "b"  # the prompt itself, in the hover
    assert "2 of 6" in caption_text(fig) and "33%" in caption_text(fig)


def _result(name):
    reqs = (RequestRecord(0, 0.0, 0.0, 1.0, 2.0, 5, (1, 2)),
            RequestRecord(1, 0.5, 1.5, 2.5, 4.0, 7, (3, 4, 5)))
    steps = (SchedulerPass(0, "prefill", 0.0, 1.0, (0,), (0,), 5),
             SchedulerPass(1, "decode", 1.0, 1.0, (0,), (0,), 6),
             SchedulerPass(2, "prefill", 1.5, 1.0, (1,), (1,), 7),
             SchedulerPass(3, "decode", 2.5, 1.5, (0, 1), (1,), 8))  # row 0 finished, still carried
    summary = ScheduleSummary(name, 2, 5, 4.0, 1.25, 2.75, 3.5, 1.5, 2.0, 4, 1)
    return ScheduleResult(summary, reqs, steps)


def test_gantt_chart_phases():
    fig = charts.gantt_chart(_result("static"), "Static", "cap", horizon=5)
    waiting, prefill, decoding, idle, arrivals = fig.data
    assert list(waiting.base) == [0.0, 0.5] and list(waiting.x) == [0.0, 1.0]
    assert list(prefill.base) == [0.0, 1.5] and list(prefill.x) == [1.0, 1.0]
    assert list(decoding.base) == [1.0, 2.5] and list(decoding.x) == [1.0, 1.5]
    # request 0 finished at 2.0 but its row rode along until the step ending at 4.0
    assert list(idle.x) == [2.0, 0.0]
    assert list(arrivals.x) == [0.0, 0.5]
    assert list(fig.layout.xaxis.range) == [0, 5]


def test_scheduler_summary_chart():
    fig = charts.scheduler_summary_chart([_result("static").summary, _result("continuous").summary])
    assert [t.name for t in fig.data] == ["static (measured)", "continuous (measured)"]
    assert list(fig.data[0].x) == ["mean latency", "p95 latency", "mean TTFT", "p95 TTFT"]
    assert list(fig.data[0].y) == [2.75, 3.5, 1.5, 2.0]


def test_cost_chart():
    costs = serving_costs(_points(), 3.6, prompt_tokens=10, output_tokens=10)
    fig = charts.cost_chart(costs, 3.6)
    out, inp = fig.data
    assert list(out.x) == ["1", "4", "16"]
    # $0.001 per second / (tokens per second) × 1e6
    assert list(out.y) == pytest.approx([100, 31.25, 12.5])
    assert list(inp.y) == pytest.approx([10, 5, 3.125])  # prefill 100, 200, 320 tokens/s
    assert "$3.60" in fig.layout.title.text
    assert list(fig.layout.yaxis.tickvals) == [2, 5, 10, 20, 50, 100, 200]
    assert out.name == "output tokens (from measured decode)"
    carried = serving_costs(_points(), 3.6, 10, 10, kv_bytes_per_token=46_080, bandwidth_gbs=20)
    assert charts.cost_chart(carried, 3.6).data[0].name.startswith("output tokens (estimate:")


def test_log_ticks():
    assert charts.log_ticks(3, 40) == [2, 5, 10, 20, 50]
    assert charts.log_ticks(0.18, 0.5) == [0.1, 0.2, 0.5, 1]
    assert charts.log_ticks(0, 5) == []


@pytest.mark.parametrize("fig", [charts.throughput_chart([]), charts.step_time_chart([], 0),
                                 charts.tradeoff_chart([]), charts.padding_chart([]),
                                 charts.gantt_chart(None, "x"), charts.scheduler_summary_chart([]),
                                 charts.cost_chart([], 1.0)])
def test_empty_states_say_what_to_do(fig):
    assert not fig.data and fig.layout.annotations[0].text


def test_tables_report_the_numbers():
    from inference.experiments.batch_sweep import BatchMemoryPlan, SweepUpdate
    from visualizations import batching_text as tables
    plans = (BatchMemoryPlan(1, 50, W, 1_000_000, 500_000, 600_000_000),
             BatchMemoryPlan(64, 50, W, 150_000_000, 30_000_000, 600_000_000))
    plan_md = tables.plan_table(plans)
    assert "| 1 |" in plan_md and "✓ runs" in plan_md and "✗ skipped" in plan_md
    upd = SweepUpdate(tuple(_points()), plans, 0, 4, 4, 10.0, "done", finished=True)
    sweep_md = tables.sweep_table(upd)
    assert "| 16 | 200 ms | 250 ms | 80.0 | 5.0 | 320 |" in sweep_md
    assert "2.0× the time for 16× the tokens" in sweep_md
    assert "from 10.0 to 80.0 tokens/s" in sweep_md
    sched_md = tables.scheduler_table(_result("static"), _result("continuous"))
    assert "| static | 1.25 | 2.75 s | 3.50 s | 1.50 s | 2.00 s | 4 | 1 |" in sched_md
    assert "exactly the same tokens" in sched_md
    cost_md = tables.cost_table(serving_costs(_points(), 3.6, 10, 10), 10, 10)
    assert "| 1 | 10.0 | $100.00 | $10.00 |" in cost_md


def _info():
    from types import SimpleNamespace
    return SimpleNamespace(device="cpu", dtype="float32", threads=2)


def test_closing_note_quotes_what_was_measured():
    from types import SimpleNamespace

    from inference.experiments.batch_sweep import SweepUpdate
    from visualizations import batching_text as text
    empty = text.closing_note(_info(), None, None)
    assert empty.startswith("### What this machine showed (cpu, float32, 2 threads)")
    assert "Run the batch sweep" in empty and "Serve the workload" in empty
    upd = SweepUpdate(tuple(_points()), (), 0, 4, 4, 10.0, "done", finished=True)
    schedules = SimpleNamespace(static=_result("static"), continuous=_result("continuous"),
                                trace="Steady mix", max_batch=4)
    note = text.closing_note(_info(), upd, schedules)
    assert ("**10.0 tokens/s at batch 1**, **80.0 tokens/s at batch 16** (8.0×), while each "
            "step took **2.0× as long**, measured" in note)
    assert "batching still paid at the largest size measured" in note
    assert "<span class='lab-big-value'>8.0×</span>" in note  # the throughput-gain card
    assert note.index("</div>\n\n") < note.index("- Decode throughput")  # list stays a list
    assert "On the “Steady mix” workload (max batch 4): static 1.2 tokens/s" in note
    assert "mean latency 2.8 s, p95 3.5 s, mean TTFT 1.50 s; continuous" in note


def test_lesson_5_notes():
    from inference.experiments.batch_sweep import BatchMemoryPlan, SweepUpdate
    from visualizations import batching_text as text
    plans = (BatchMemoryPlan(1, 50, W, 1_000_000, 500_000, 600_000_000),)
    running = SweepUpdate((), plans, 1, 1, 4, 10.0, "Batch 1")
    progress = text.sweep_progress_markdown(running, "Batch 1: step 1")
    assert progress == "⏳ Batch 1: step 1"  # one line: the memory plan is shown on its own
    done = SweepUpdate((), plans, 0, 4, 4, 10.0, "done", finished=True)
    assert text.sweep_progress_markdown(done, "done").startswith("✅ done")
    assert "at 10:42 and shared" in text.shared_sweep_message("10:42", "3 sizes")
    step = _result("static").steps[3]
    assert text.scheduler_step_markdown("static", step) == (
        "⏳ static batching: forward pass 4 (decode, 2 rows, 1500 ms) at t = 2.50 s")
    assert text.scheduler_done_markdown().startswith("✅ Both schedulers served every request.")
    assert "at 09:05, shared" in text.scheduler_done_markdown("09:05")
    assert text.VIRTUAL_CLOCK in text.scheduler_done_markdown()
    pad = text.padding_markdown(2, 4, 10)
    assert "these 2 prompts computes **10 positions**, of which **4 are padding** (40%" in pad
    assert text.padding_markdown(0, 0, 0) == text.NO_PROMPTS
    assert text.prompt_labels(["short", "x" * 30]) == ["short", "x" * 23 + "…"]


def test_where_batching_stops_paying():
    """The step gets slower with the batch, and past some batch it grows
    about in proportion (compute-bound); the note finds that step from the measured points."""
    from visualizations import batching_text as text
    pts = [BatchPoint(1, 10, 0.1, 0.100, (0.1,), 0, W),
           BatchPoint(8, 10, 0.1, 0.150, (0.15,), 0, W),
           BatchPoint(16, 10, 0.1, 0.280, (0.28,), 0, W),  # 2× the rows, 1.87× the time
           BatchPoint(32, 10, 0.1, 0.560, (0.56,), 0, W)]
    note = text.where_batching_stops_paying(pts)
    assert note.startswith("Batching stopped paying between batch 8 and 16")
    assert "each step 1.9× as long" in note and "every larger batch" in note
    assert "more than one batch size" in text.where_batching_stops_paying(pts[:1])


def test_where_batching_stops_paying_gives_no_verdict_inside_the_noise():
    """1.59× against a line of 1.60× is not a verdict, and a crossing
    that later batches undo is not where batching stopped paying."""
    from visualizations import batching_text as text
    near = [BatchPoint(1, 10, 0.1, 0.100, (0.1, 0.1), 0, W),
            BatchPoint(2, 10, 0.1, 0.161, (0.16, 0.162), 0, W)]  # line: 0.8 × 2 = 1.60×
    note = text.where_batching_stops_paying(near)
    assert note.startswith("Too close to call") and "stopped paying" not in note
    undone = [BatchPoint(1, 10, 0.1, 0.100, (0.1,), 0, W),
              BatchPoint(2, 10, 0.1, 0.190, (0.19,), 0, W),  # 1.9× for 2× (a busy moment)
              BatchPoint(4, 10, 0.1, 0.200, (0.2,), 0, W),  # then 1.05× for 2×
              BatchPoint(8, 10, 0.1, 0.400, (0.4,), 0, W)]
    note = text.where_batching_stops_paying(undone)
    assert note.startswith("Batching stopped paying between batch 4 and 8")
    noisy = [BatchPoint(1, 10, 0.1, 0.100, (0.05, 0.1, 0.15), 0, W),
             BatchPoint(2, 10, 0.1, 0.190, (0.19, 0.19, 0.19), 0, W)]  # ±100% spread
    assert text.where_batching_stops_paying(noisy).startswith("Too close to call")


def test_lesson_5_text_does_not_call_the_slowdown_small():
    from lessons.common.lesson_text import lesson_text
    md = lesson_text("lesson5_batching.md")
    assert "only a little slower" not in md and "a little of the second" not in md
    assert "3.6× slower" in md and "not 64×" in md and "compute-bound" in md
