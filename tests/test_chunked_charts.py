"""The chunked-prefill charts plot the step records' own numbers (hand-made records)."""
from inference.server_plan import StepPlan
from inference.step_clock import StepRecord, mean_parts
from visualizations.server_view import budget_split_figure, step_parts_figure


def rec(i, dec, pre, fwd=0.4):
    plan = StepPlan(i, tuple(range(dec)), ((9, pre),) if pre else (), budget=128)
    return StepRecord(plan=plan, first_tokens=0, forward_s=fwd, cache_s=0.02,
                      sample_s=0.01, handoff_s=0.001, total_s=fwd + 0.05)


def test_chunked_budget_chart_stacks_decode_and_chunk_tokens():
    steps = [rec(0, 3, 125), rec(1, 3, 125), rec(2, 4, 0)]
    fig = budget_split_figure(steps, 128)
    decode, chunk, line = fig.data
    assert list(decode.y) == [3, 3, 4] and list(chunk.y) == [125, 125, 0]
    assert list(line.y) == [128, 128]
    assert fig.layout.barmode == "stack"
    assert len(budget_split_figure(steps, 0).data) == 2  # no budget line when unchunked
    assert not budget_split_figure((), 128).data  # the empty state


def test_chunked_step_parts_chart_and_means():
    steps = [rec(0, 3, 125, fwd=0.4), rec(1, 3, 0, fwd=0.2)]
    fig = step_parts_figure(steps)
    assert [round(v, 6) for v in fig.data[0].y] == [400.0, 200.0]
    assert [round(v, 6) for v in fig.data[4].y] == [19.0, 19.0]  # other: 50 - 20 - 10 - 1 ms
    means = mean_parts(steps)
    assert abs(means["forward_s"] - 0.3) < 1e-12 and abs(means["other_s"] - 0.019) < 1e-12
    assert mean_parts([])["total_s"] == 0.0
