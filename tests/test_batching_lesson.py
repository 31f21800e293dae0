"""Lesson 5 on the real model: schedulers, the batch sweep, the memory guard, cost, handlers."""
import doctest
import re

import pytest
import torch

from inference import stats
from inference.errors import SettingOutOfRangeError
from inference.experiments.batch_sweep import (
    BatchPoint,
    check_batch_fits,
    largest_fitting_batch,
    plan_batch,
    run_sweep,
    sweep_sizes,
)
from inference.experiments.schedulers import (
    PROMPTS,
    Request,
    preset_trace,
    random_trace,
    serve_continuous,
    serve_static,
)
from inference.experiments.serving_cost import serving_costs
from inference.experiments.shared_results import SharedResults
from inference.generation import stream
from inference.stats import percentile
from inference.tokens import prompt_ids


@pytest.fixture(scope="module")
def trace(tok):
    """Four requests with different prompt lengths; 2 and 3 arrive while 0 and 1 run."""
    texts = [PROMPTS[0], PROMPTS[6], PROMPTS[3], PROMPTS[1]]
    plan = [(0.0, 3), (0.0, 6), (0.001, 4), (0.002, 3)]  # (arrival s, max new tokens)
    reqs = [Request(i, a, t, tuple(prompt_ids(tok, t)), n)
            for i, (t, (a, n)) in enumerate(zip(texts, plan))]
    assert len({len(r.prompt_ids) for r in reqs}) == 4  # mixed prompt lengths: padding is exercised
    return reqs


@pytest.fixture(scope="module")
def alone(lm, trace):
    return {r.rid: [e.token_id for e in stream(lm, list(r.prompt_ids),
                                               max_new_tokens=r.max_new_tokens)]
            for r in trace}


@pytest.fixture(scope="module")
def static(lm, trace):
    *_, result = serve_static(lm, trace, max_batch=2, fill_wait_s=0.0)
    return result


@pytest.fixture(scope="module")
def continuous(lm, trace):
    *_, result = serve_continuous(lm, trace, max_batch=2)
    return result


@pytest.mark.parametrize("which", ["static", "continuous"])
def test_schedulers_give_each_request_its_tokens_alone(request, alone, trace, which):
    result = request.getfixturevalue(which)
    assert [r.rid for r in result.requests] == [r.rid for r in trace]
    for rec in result.requests:
        assert list(rec.tokens) == alone[rec.rid]
        assert rec.arrival <= rec.start < rec.first_token <= rec.finish


def test_continuous_never_steps_a_finished_request(continuous, alone):
    decode = [s for s in continuous.steps if s.kind == "decode"]
    for s in decode:
        assert s.rows == s.active
    finish = {r.rid: r.finish for r in continuous.requests}
    for s in decode:  # every row in a step is still unfinished when the step starts
        assert all(finish[rid] > s.start for rid in s.rows)
    # each request is in exactly one prefill and (its tokens - 1) decode steps: no wasted row
    for rid, toks in alone.items():
        assert sum(rid in s.rows for s in decode) == len(toks) - 1
    assert continuous.summary.wasted_row_steps == 0
    # rows joined mid-run: some decode step mixes requests admitted at different times
    start = {r.rid: r.start for r in continuous.requests}
    assert any(len({start[rid] for rid in s.rows}) > 1 for s in decode)
    assert max(len(s.rows) for s in continuous.steps) <= 2


def test_static_keeps_finished_rows_until_the_longest_ends(static, trace):
    # batches of mixed prompt lengths (left-padded together): checked equal to alone above
    assert [s.rows for s in static.steps if s.kind == "prefill"] == [(0, 1), (2, 3)]
    assert len(trace[0].prompt_ids) != len(trace[1].prompt_ids)
    # request 0 (3 tokens) shares a batch with request 1 (6 tokens) and idles in it
    assert static.summary.wasted_row_steps > 0
    first_batch = [s for s in static.steps if s.rows == (0, 1)]
    assert len(first_batch) == 6  # prefill + 5 decode steps, set by the longest request
    later = [s for s in static.steps if 2 in s.rows]
    assert min(s.start for s in later) >= max(s.start + s.seconds for s in first_batch)


def test_summary_numbers(continuous):
    s = continuous.summary
    lat = sorted(r.latency for r in continuous.requests)
    assert s.output_tokens == sum(len(r.tokens) for r in continuous.requests)
    assert s.p95_latency == lat[-1]  # nearest rank of 4 values
    assert s.mean_latency == pytest.approx(sum(lat) / 4)
    assert s.throughput == pytest.approx(s.output_tokens / s.makespan)
    assert percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 50) == 5
    assert doctest.testmod(stats).failed == 0  # the one percentile rule, with its examples


def test_traces_are_seeded(tok):
    a, b = random_trace(tok, 5, 2.0, seed=3), random_trace(tok, 5, 2.0, seed=3)
    assert a == b and a != random_trace(tok, 5, 2.0, seed=4)
    assert all(x.arrival <= y.arrival for x, y in zip(a, a[1:]))
    assert len(preset_trace(tok)) >= 6
    with pytest.raises(SettingOutOfRangeError, match="Unknown workload"):
        preset_trace(tok, "nope")


def test_memory_guard_refuses_a_batch_over_budget(lm):
    plan = plan_batch(lm, 64, 40, 24, budget_bytes=700 * 10**6)
    assert plan.weight_bytes == 538_060_032
    assert plan.kv_bytes == 46_080 * 64 * 64  # bytes per token × tokens per row × rows
    # 4 bytes × rows × [tokens × (4 × hidden + 3 × intermediate) + heads × tokens² + vocab]
    assert plan.activation_bytes == 4 * 64 * (40 * (4 * 576 + 3 * 1536) + 9 * 40**2 + 49_152)
    with pytest.raises(SettingOutOfRangeError,
                       match=r"Batch 64 would need about .* budget is 700 MB"):
        check_batch_fits(plan)
    check_batch_fits(plan_batch(lm, 1, 40, 24, budget_bytes=700 * 10**6))  # fits: no error
    assert largest_fitting_batch(lm, [1, 2, 4, 8, 16, 32, 64], 40, 24, 600 * 10**6) == 8
    with pytest.raises(SettingOutOfRangeError, match="Batch 1"):
        largest_fitting_batch(lm, [1, 2], 40, 24, 100 * 10**6)


def test_sweep_refuses_sizes_over_budget(lm, chat_ids):
    assert sweep_sizes(64) == [1, 2, 4, 8, 16, 32, 64] and sweep_sizes(6) == [1, 2, 4, 6]
    with pytest.raises(SettingOutOfRangeError, match="memory budget"):
        next(run_sweep(lm, chat_ids, max_batch=2, decode_steps=2, budget_bytes=10**6))


def _point(batch, step_s, prefill_s=1.0, prompt=100):
    return BatchPoint(batch, prompt, prefill_s, step_s, (step_s,), 0, 538_060_032)


def test_cost_arithmetic():
    # 1 request at 0.001 s/step = 1,000 tokens/s; $3.60/h = $0.001/s -> $1 per million tokens
    costs = serving_costs([_point(1, 0.001, prefill_s=0.01, prompt=100), _point(4, 0.002)], 3.6,
                          prompt_tokens=100, output_tokens=1000)
    one, four = costs
    assert one.usd_per_million_output == pytest.approx(1.0)
    assert one.usd_per_million_input == pytest.approx(0.1)  # 10,000 prefill tokens/s
    assert one.seconds_per_conversation == pytest.approx(0.01 + 1.0)
    assert one.usd_per_conversation == pytest.approx(0.001 * 1.01)
    assert four.usd_per_million_output == pytest.approx(0.5)  # 2,000 tokens/s
    with pytest.raises(SettingOutOfRangeError):
        serving_costs([_point(1, 0.1)], -1)


def test_cost_prices_each_precision_mode_at_batch_1():
    from types import SimpleNamespace

    from visualizations.batching_text import mode_cost_table
    assert "Run lesson 6" in mode_cost_table((), 3.6)
    modes = (SimpleNamespace(key="fp32", decode_tokens_per_s=10.0),
             SimpleNamespace(key="int8", decode_tokens_per_s=16.0))
    md = mode_cost_table(modes, 3.6)  # $3.60/h = $0.001/s
    assert "| fp32 | 10.0 | $100.00 | 1.00× |" in md
    assert "| int8 | 16.0 | $62.50 | 0.62× |" in md


def test_cost_carries_only_the_added_cache_reads_to_the_conversations_context():
    """The sweep decodes at a short context; a conversation's tokens read a
    longer cache. Only the extra reads are added to the measured step (at the measured
    bandwidth), or the extra attention FLOPs at the measured peak, whichever is longer; the
    rest of the step stays as measured (a compute-bound batch is not slowed as if it were all
    memory time)."""
    kv, bw = 46_080, 20.0  # bytes per token, GB/s
    one, eight = _point(1, 0.05, prompt=100), _point(8, 0.08, prompt=100)
    short = 100 + 0.5  # the sweep's mean context: its prompt and half of its one timed step
    costs = serving_costs([one, eight], 3.6, prompt_tokens=200, output_tokens=600,
                          kv_bytes_per_token=kv, bandwidth_gbs=bw)
    for c, p in zip(costs, (one, eight)):
        added = p.batch * kv * (500 - short) / (bw * 1e9)  # 200 + 600 / 2 = 500
        assert c.context_tokens == 500 and c.measured_output_tokens_per_s == p.tokens_per_s
        assert c.output_tokens_per_s == pytest.approx(p.batch / (p.step_seconds + added))
        assert c.usd_per_million_output == pytest.approx(3.6 / (c.output_tokens_per_s * 3600)
                                                         * 1e6)
    # a class's case: batch 64, a step of 0.27 s; 46 kB a token, 500 - 12 extra positions at
    # 22.5 GB/s add ~64 ms (~1.24×), not the 2.33× of scaling the whole step by bytes read
    big = _point(64, 0.27, prompt=12)
    (c,) = serving_costs([big], 3.6, 200, 600, kv_bytes_per_token=kv, bandwidth_gbs=22.5)
    slowdown = big.tokens_per_s / c.output_tokens_per_s
    assert 1.1 < slowdown < 1.4
    plain = serving_costs([one], 3.6, 200, 600)[0]
    assert plain.output_tokens_per_s == one.tokens_per_s and plain.context_tokens == 0


# ---- handlers, on the real model with tiny sizes ----

def test_sweep_handler_streams_and_shares(lm):
    from inference.config import Settings
    from lessons import batching_handlers as run
    shared, settings = SharedResults(), Settings()
    frames = list(run.sweep_frames(lm, settings, shared, max_batch=2, steps=2, budget_mb=None))
    # per batch size: a prefill notice, a prefilled one (each ends a job: the server's steps
    # run between) and 2 timed steps, then the result; on a loaded machine a figure that is
    # impossible against batch 1 is measured once more, its frames said as such
    again = any("Impossible figure" in (f.progress or "") for f in frames)
    assert len(frames) > 2 * 4 + 1 if again else len(frames) == 2 * 4 + 1
    progress_only = [f for f in frames if f.throughput is None]
    assert progress_only and all(f.progress.startswith("⏳") and f.sweep is None
                                 and f.closing is None and f.table is None
                                 for f in progress_only)  # charts left as they are
    last = frames[-1]
    state = last.sweep
    assert last.progress.startswith("✅") and "\n" not in last.progress  # one line
    assert "Memory plan" in last.plan and "| 2 |" in last.plan  # shown under the charts
    assert all(f.plan is None for f in progress_only)  # the plan left as it is
    assert state.finished and [p.batch for p in state.points] == [1, 2]
    assert all(f.sweep is None for f in frames[:-1])  # only a finished sweep is kept
    prompt = len(prompt_ids(lm.tokenizer, run.SWEEP_PROMPT))
    # one warm-up step at each thread count tried (the default and 1, on a CPU with more)
    warm_ups = 2 if lm.device.type == "cpu" and torch.get_num_threads() > 1 else 1
    for p in state.points:
        assert len(p.step_times) == 2 and p.step_seconds > 0
        assert p.tokens_per_s == pytest.approx(p.batch / p.step_seconds)
        assert p.cache_bytes == 46_080 * p.batch * (prompt + warm_ups + 2)  # + 2 timed steps
        assert p.threads in (1, torch.get_num_threads())
    assert [tr.x for tr in last.throughput.data][0] == (1, 2)
    assert "tokens/s at batch 1" in last.closing and "at batch 2" in last.closing
    # the same numbers as big cards under Run sweep, from the same finished record
    one, two = state.points
    shown = re.findall(r"<span class='lab-big-value'>([^<]*)</span>", last.cards)
    assert shown[:2] == [f"{one.tokens_per_s:.1f}", f"{two.tokens_per_s:.1f}"]
    assert f"**{one.tokens_per_s:.1f} tokens/s at batch 1**" in last.closing
    assert all(f.cards is None for f in progress_only)  # the cards left as they are
    if "busy while measuring" in last.closing:  # the numbers stand, no word drawn from them
        assert "busy machine: noisy" in last.cards and "grows" not in last.cards
    assert "| 2 |" in last.table
    # the mechanism: batch 2's measured step beside batch 1's, both rows through one pass
    one, two = state.points
    assert (f"Batch 2: 2 rows in one pass share one read of the weights "
            f"({two.weight_bytes / 1e6:,.0f} MB) · measured step "
            f"<b>{two.step_seconds * 1000:,.1f} ms</b>") in last.diagram
    assert f"batch 1: <b>{one.step_seconds * 1000:,.1f} ms</b>" in last.diagram
    assert (f"2× the rows took {two.step_seconds / one.step_seconds:.2f}× the step time"
            in last.diagram)
    assert "data-rows='2'" in last.diagram and "data-rows='1'" in last.diagram
    assert all(f.diagram is None for f in progress_only)  # the diagram left as it is
    again = list(run.sweep_frames(lm, settings, shared, max_batch=2, steps=2, budget_mb=None))
    if len(again) == 1:  # a quiet sweep is shared with the next visitor
        assert "shared with every visitor" in again[0].progress and again[0].sweep == state
        assert not again[0].sweep.noise.busy  # with its reading: later views judge it the same
    else:  # judged busy (noise.py): not shared, measured again, and the notice said so
        assert "busy while measuring" in last.closing and again[-1].sweep != state
        assert state.noise.busy
    view = run.cost_view(lm, settings, state, price_per_hour=1.0, prompt_tokens=10,
                         output_tokens=20)
    assert "$ / M output" in view.table and len(view.plot.data) == 2
    assert run.cost_view(lm, settings, None, price_per_hour=1.0, prompt_tokens=10,
                         output_tokens=20).table == "Run the batch sweep first: costs come " \
        "from its measured throughput."
    with pytest.raises(SettingOutOfRangeError, match="Largest batch"):
        next(run.sweep_frames(lm, settings, shared, max_batch=999, steps=2, budget_mb=None))
    with pytest.raises(SettingOutOfRangeError, match="Timed decode steps"):
        next(run.sweep_frames(lm, settings, shared, max_batch=2,
                              steps=settings.sweep_decode_steps.high + 1, budget_mb=None))
    with pytest.raises(SettingOutOfRangeError, match="Memory budget"):
        next(run.sweep_frames(lm, settings, shared, max_batch=2, steps=2, budget_mb=1))
    with pytest.raises(SettingOutOfRangeError, match="Hardware price"):
        run.cost_view(lm, settings, state, price_per_hour=-1, prompt_tokens=10,
                      output_tokens=20)


def test_schedule_handler_and_padding(lm):
    from dataclasses import replace

    from inference.config import Range, Settings
    from lessons import batching_handlers as run
    # random outputs of 2..3 tokens (the trace's lengths come from Settings)
    settings = replace(Settings(), trace_new_tokens=Range(2, 256, 3))
    shared = SharedResults()
    ask = dict(workload=run.RANDOM, seed=1, requests=3, rate_per_s=8.0, max_batch=2,
               fill_wait_s=0.0)
    frames = list(run.schedule_frames(lm, settings, shared, **ask))
    assert all(f.static is None and f.closing is None for f in frames[:-1])
    assert "static batching: forward pass 1" in frames[0].progress
    last = frames[-1]
    assert "virtual clock" in last.progress and "exactly the same tokens" in last.table
    state = last.schedules
    assert state.static.summary.requests == 3 and len(last.summary.data) == 2
    assert all(2 <= len(r.tokens) <= 3 for r in state.static.requests)
    assert state.trace == "Random (seeded), seed 1, 3 requests at 8/s" and state.max_batch == 2
    assert "continuous" in last.closing and "static" in last.closing
    assert last.static.layout.title.text == "Static batching (max batch 2)"
    again = list(run.schedule_frames(lm, settings, shared, **ask))
    if "busy while measuring" in last.progress:  # judged busy (noise.py): measured again
        assert len(again) > 1 and again[-1].schedules is not state
    else:
        assert len(again) == 1 and again[0].schedules is state
        assert "Measured earlier on this machine" in again[0].progress
    with pytest.raises(SettingOutOfRangeError, match="Max batch"):
        next(run.schedule_frames(lm, settings, shared, **{**ask, "max_batch": 17}))
    with pytest.raises(SettingOutOfRangeError, match="Batch fill wait"):
        next(run.schedule_frames(lm, settings, shared, **{**ask, "fill_wait_s": 6}))
    with pytest.raises(SettingOutOfRangeError, match="Requests"):
        next(run.schedule_frames(lm, settings, shared, **{**ask, "requests": 99}))
    with pytest.raises(SettingOutOfRangeError, match="Unknown workload"):
        next(run.schedule_frames(lm, settings, shared, **{**ask, "workload": "nope"}))
    pad = run.padding_view(lm, settings, "Hi\nWhat is the capital of France?")
    assert "padding" in pad.text and pad.plot.data[0].z[0][0] == 0  # short prompt: padded
    assert "these 2 prompts" in pad.text
    many = "\n".join(f"Prompt number {i}" for i in range(settings.max_lines + 3))
    assert f"these {settings.max_lines} prompts" in run.padding_view(lm, settings, many).text
    assert run.padding_view(lm, settings, " \n ").text == "Type a few prompts, one per line."


def test_panel_builds_with_limits_and_named_endpoints(lm):
    import gradio as gr

    from inference.config import Settings
    from lessons import batching_panel as panel
    from lessons.common.context import AppContext
    from test_settings import limit_name
    settings = Settings()
    with gr.Blocks() as demo:
        panel.build(AppContext(lm, settings, SharedResults(), demo=demo))
    bounded = [b for b in demo.blocks.values() if isinstance(b, gr.Slider)
               or (isinstance(b, gr.Number) and (b.minimum is not None or b.maximum is not None))]
    assert all(limit_name(b) for b in bounded), [b.label for b in bounded if not limit_name(b)]
    assert {limit_name(b) for b in bounded} == {
        "sweep_decode_steps", "memory_budget_mb", "scheduler_batch", "fill_wait_s", "seed",
        "trace_requests", "trace_rate_per_s", "price_per_hour", "conversation_prompt_tokens",
        "conversation_output_tokens", "guess"}
    for b in bounded:
        rng = settings.ranges()[limit_name(b)]
        assert (b.minimum, b.maximum) == (rng.low, rng.high)
    largest = next(b for b in demo.blocks.values() if b.elem_id == "batch-sweep-max")
    assert max(v for _, v in largest.choices) == settings.batch.high
    assert largest.value == settings.batch.default
    apis = {d.api_name for d in demo.fns.values()}
    assert {"batch_sweep", "batch_padding", "batch_schedulers"} <= apis
    closing = next(b for b in demo.blocks.values() if b.elem_id == "batch-closing")
    assert "Run the batch sweep" in closing.value
    cards = next(b for b in demo.blocks.values() if b.elem_id == "batch-cards")
    assert "Run sweep" in cards.value and "lab-big" not in cards.value  # the empty state


def test_row_batch_join_pads_left_and_keep_trims():
    import torch
    from transformers import DynamicCache

    from inference.paged_batch import RowBatch

    # keys/values [B, 1, width, 1] holding 1..width; a mask with `real` ones per row
    def rows(ids, width, real):
        k = torch.arange(1, width + 1, dtype=torch.float32).repeat(len(ids), 1)[:, None, :, None]
        mask = torch.tensor([[0] * (width - r) + [1] * r for r in real])
        return RowBatch(ids, DynamicCache(ddp_cache_data=[(k, k.clone())]), mask, torch.tensor(ids))

    a, b = rows([0], 2, [2]), rows([1, 2], 4, [4, 3])
    joined = a.join(b)
    assert joined.rows == [0, 1, 2] and joined.width == 4
    assert joined.mask.tolist() == [[0, 0, 1, 1], [1, 1, 1, 1], [0, 1, 1, 1]]
    assert joined.cache.layers[0].keys[0, 0, :, 0].tolist() == [0, 0, 1, 2]  # zeros on the left
    assert joined.next_token.tolist() == [0, 1, 2]
    kept = joined.keep([0, 2])  # row 1 (the longest) leaves: one column is padding everywhere
    assert kept.rows == [0, 2] and kept.width == 3
    assert kept.mask.tolist() == [[0, 1, 1], [1, 1, 1]]
    assert kept.cache.layers[0].keys[:, 0, :, 0].tolist() == [[0, 1, 2], [2, 3, 4]]
