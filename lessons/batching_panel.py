"""Lesson 5 panel: batching measured. A batch-size sweep, padding, static vs continuous
scheduling of a real workload, and what it all means for the price of a token.

Handlers are plain module-level functions (tested directly on the real model); `build()`
lays out controls and wires them. Sweeps and schedules are long on a small CPU: they stream
progress, can be stopped, run one at a time (`concurrency_id="heavy"`), and their finished
results are kept in the shared `SharedResults` so a classroom does not rerun them.
"""
from __future__ import annotations

import time
from typing import Iterator

import gradio as gr

from inference.experiments.batch_sweep import SweepUpdate, run_sweep, sweep_sizes
from inference.batching import padding_waste
from inference.config import Settings
from inference.errors import check_range
from inference.experiments.memory_guard import (check_batch_fits, largest_fitting_batch, memory_budget_bytes,
                                    model_shape, plan_batch)
from inference.experiments.schedulers import ScheduleResult, serve_continuous, serve_static
from inference.experiments.serving_cost import serving_costs
from inference.tokens import prompt_ids
from inference.experiments.workload import PRESETS, preset_trace, random_trace
from visualizations import batching_charts as charts
from visualizations import batching_tables as tables
from visualizations.style import machine_caption

from .feedback import guarded
from .lesson_text import lesson_text

SWEEP_PROMPT = "Explain why the sky is blue in two sentences."
RANDOM = "Random (seeded)"
RANDOM_MIN_NEW, RANDOM_MAX_NEW = 4, 32  # output lengths of the random trace (tokens)
DEFAULT_PADDING = "Hi!\nWhat is the capital of France?\nWrite a haiku about autumn leaves falling slowly."
VIRTUAL_CLOCK = ("*Times are on a **virtual clock**: it advances by the measured, synced duration of "
                 "each forward pass (and jumps ahead while the server is idle), so arrivals replay "
                 "the same way on every run. Every step in it really ran on this machine.*")


def _caption(lm) -> str:
    return machine_caption(lm.info.device, lm.info.dtype, lm.info.threads)


def _budget(lm, budget_mb: float | None) -> int:
    if budget_mb is None or budget_mb <= 0:
        return memory_budget_bytes(lm.device, 0.5)
    check_range("Memory budget (MB)", budget_mb, 50, 10_000_000)
    return int(budget_mb * 1e6)


def closing_note(lm, sweep: SweepUpdate | None, sched: dict | None) -> str:
    """The lesson's closing note, from what was measured on this machine in this session."""
    parts = [f"### What this machine showed ({lm.info.device}, {lm.info.dtype}, {lm.info.threads} threads)"]
    if sweep and sweep.points:
        one, big = sweep.points[0], sweep.points[-1]
        parts.append(f"- Decode throughput: **{one.tokens_per_s:.1f} tokens/s at batch 1**, "
                     f"**{big.tokens_per_s:.1f} tokens/s at batch {big.batch}** "
                     f"({big.tokens_per_s / one.tokens_per_s:.1f}×), measured.")
    else:
        parts.append("- Run the batch sweep to fill in throughput at batch 1 and at the largest batch.")
    if sched:
        s, c = sched["static"].summary, sched["continuous"].summary
        parts.append(f"- On the “{sched['trace']}” workload (max batch {sched['max_batch']}): "
                     f"static {s.throughput:.1f} tokens/s, mean latency {s.mean_latency:.1f} s, p95 "
                     f"{s.p95_latency:.1f} s, mean TTFT {s.mean_ttft:.2f} s; continuous "
                     f"{c.throughput:.1f} tokens/s, mean latency {c.mean_latency:.1f} s, p95 "
                     f"{c.p95_latency:.1f} s, mean TTFT {c.mean_ttft:.2f} s.")
    else:
        parts.append("- Serve the workload to compare static and continuous batching here.")
    return "\n".join(parts)


def sweep_frames(lm, settings: Settings, shared, max_batch: int, steps: int, budget_mb: float | None,
                 sched: dict | None = None) -> Iterator[tuple]:
    """Yield (progress, throughput fig, step fig, trade-off fig, table, state, closing note)."""
    max_batch, steps = int(max_batch), int(steps)
    check_range("Largest batch", max_batch, 1, settings.max_batch)
    check_range("Decode steps", steps, 2, 64)
    prompt = prompt_ids(lm.tokenizer, SWEEP_PROMPT)
    budget = _budget(lm, budget_mb)
    sizes = sweep_sizes(max_batch)
    cap = largest_fitting_batch(model_shape(lm), sizes, len(prompt), steps + 1, budget)
    key = ("batch-sweep", lm.info.device, lm.info.dtype, tuple(s for s in sizes if s <= cap), steps)
    cached = shared.get(key) if shared is not None else None
    if cached is not None:
        upd, when = cached
        yield _sweep_outputs(lm, upd, f"Measured earlier on this machine at {when} and shared with every "
                                      f"visitor (same settings). {upd.message}", sched)
        return
    last = None
    for upd in run_sweep(lm, prompt, max_batch, steps, budget):
        grew = last is None or len(upd.points) != len(last.points) or upd.finished
        last = upd
        if grew:
            yield _sweep_outputs(lm, upd, upd.message, sched)
        else:
            yield (f"⏳ {upd.message}",) + (gr.skip(),) * 6
    if shared is not None and last is not None and last.finished:
        shared.put(key, (last, time.strftime("%H:%M")))


def _sweep_outputs(lm, upd: SweepUpdate, message: str, sched) -> tuple:
    cap = _caption(lm) + " · median of each batch's decode steps"
    done = upd.finished
    return ((f"✅ {message}" if done else f"⏳ {message}") + "\n\n" + tables.plan_table(upd.plans),
            charts.throughput_chart(upd.points, cap), charts.step_time_chart(upd.points, upd.bandwidth_gbs, cap),
            charts.tradeoff_chart(upd.points, cap), tables.sweep_table(upd),
            upd if done else gr.skip(), closing_note(lm, upd, sched) if done else gr.skip())


def padding_view(lm, settings: Settings, text: str) -> tuple:
    """(padding chart, markdown) for the prompts typed, one per line, chat-templated."""
    lines = [t.strip() for t in (text or "").splitlines() if t.strip()][:8]
    if not lines:
        return charts.padding_chart([]), "Type a few prompts, one per line."
    prompts = [prompt_ids(lm.tokenizer, t, max_chars=settings.max_prompt_chars,
                          max_tokens=settings.max_prompt_tokens) for t in lines]
    padded, total = padding_waste(prompts)
    labels = [t if len(t) <= 24 else t[:23] + "…" for t in lines]
    md = (f"A batched prefill of these {len(prompts)} prompts computes **{total} positions**, of which "
          f"**{padded} are padding** ({padded / total:.0%} of the work, and of the KV cache, spent on "
          f"nothing). The attention mask hides them, so answers are unchanged. Continuous batching "
          f"prefills each group of newcomers on its own and trims padding columns once no row needs them.")
    return charts.padding_chart([len(p) for p in prompts], labels), md


def _trace(lm, workload: str, seed: int, n: int, rate: float):
    if workload == RANDOM:
        return random_trace(lm.tokenizer, int(n), float(rate), RANDOM_MIN_NEW, RANDOM_MAX_NEW, int(seed))
    return preset_trace(lm.tokenizer, workload)


def schedule_frames(lm, settings: Settings, shared, workload: str, seed: int, n: int, rate: float,
                    max_batch: int, fill_wait: float, sweep: SweepUpdate | None = None) -> Iterator[tuple]:
    """Serve the trace both ways. Yields (progress, static Gantt, continuous Gantt, summary fig,
    summary markdown, state, closing note)."""
    max_batch = int(max_batch)
    check_range("Max batch", max_batch, 1, 16)
    check_range("Batch fill wait (s)", float(fill_wait), 0, 10)
    trace = _trace(lm, workload, seed, n, rate)
    longest = max(len(r.prompt_ids) for r in trace) + max(r.max_new_tokens for r in trace)
    check_batch_fits(plan_batch(model_shape(lm), max_batch, longest, 0, _budget(lm, None)))
    name = f"{RANDOM}, seed {int(seed)}, {int(n)} requests at {float(rate):g}/s" if workload == RANDOM else workload
    key = ("schedulers", lm.info.device, lm.info.dtype, name, max_batch, float(fill_wait))
    cached = shared.get(key) if shared is not None else None
    if cached is None:
        results = {}
        runs = [("static", serve_static(lm, trace, max_batch, float(fill_wait))),
                ("continuous", serve_continuous(lm, trace, max_batch))]
        for label, events in runs:
            for ev in events:
                if isinstance(ev, ScheduleResult):
                    results[label] = ev
                else:
                    yield (f"⏳ {label} batching: forward pass {ev.index + 1} ({ev.kind}, {len(ev.rows)} rows, "
                           f"{ev.seconds * 1000:.0f} ms) at t = {ev.start:.2f} s",) + (gr.skip(),) * 6
        cached = {"static": results["static"], "continuous": results["continuous"], "trace": name,
                  "max_batch": max_batch, "when": time.strftime("%H:%M")}
        if shared is not None:
            shared.put(key, cached)
        note = "✅ Both schedulers served every request."
    else:
        note = f"✅ Measured earlier on this machine at {cached['when']}, shared with every visitor."
    yield (note + " " + VIRTUAL_CLOCK,) + schedule_outputs(lm, cached) + (closing_note(lm, sweep, cached),)


def schedule_outputs(lm, sched: dict) -> tuple:
    """(static Gantt, continuous Gantt, summary figure, summary markdown, state)."""
    st, co = sched["static"], sched["continuous"]
    horizon = max(r.finish for r in st.requests + co.requests) * 1.03
    cap = _caption(lm) + " · virtual clock = sum of measured step times"
    md = tables.scheduler_table(st, co)
    return (charts.gantt_chart(st, f"Static batching (max batch {sched['max_batch']})", cap, horizon),
            charts.gantt_chart(co, f"Continuous batching (max batch {sched['max_batch']})", cap, horizon),
            charts.scheduler_summary_chart([st.summary, co.summary], cap), md, sched)


def cost_view(lm, sweep: SweepUpdate | None, price: float, prompt_tokens: int, output_tokens: int) -> tuple:
    """(cost chart, markdown) from the last measured sweep and the user's hourly price."""
    if sweep is None or not sweep.points:
        return charts.cost_chart([], 0), "Run the batch sweep first: costs come from its measured throughput."
    costs = serving_costs(sweep.points, float(price), int(prompt_tokens), int(output_tokens))
    md = tables.cost_table(costs, int(prompt_tokens), int(output_tokens))
    return charts.cost_chart(costs, float(price), _caption(lm)), md


def build(lm, settings: Settings, shared=None) -> None:
    """Lay out Lesson 5 inside the caller's tab. `shared`: the app's SharedResults (or None)."""
    gr.Markdown(lesson_text("lesson5_batching.md"), elem_id="batch-lesson-text")
    sweep_state, sched_state = gr.State(None), gr.State(None)
    default_budget = memory_budget_bytes(lm.device, 0.5) // 10**6
    with gr.Tabs():
        with gr.Tab("1 · Batch sweep"):
            with gr.Row():
                s_max = gr.Dropdown([b for b in (4, 8, 16, 32, 64) if b <= settings.max_batch],
                                    value=min(32, settings.max_batch), label="Largest batch",
                                    elem_id="batch-sweep-max")
                s_steps = gr.Slider(4, 32, value=12, step=1, label="Timed decode steps per batch size",
                                    elem_id="batch-sweep-steps")
                s_budget = gr.Number(default_budget, label="Memory budget (MB; default: half the free memory)",
                                     minimum=50, precision=0, elem_id="batch-sweep-budget")
            with gr.Row():
                s_btn = gr.Button("Run sweep", variant="primary", elem_id="batch-sweep-btn")
                s_stop = gr.Button("Stop", variant="stop", elem_id="batch-sweep-stop")
            s_progress = gr.Markdown(elem_id="batch-sweep-progress")
            s_thr = gr.Plot(charts.throughput_chart([]), elem_id="batch-sweep-throughput", label="Throughput vs batch size")
            s_step = gr.Plot(charts.step_time_chart([], 0), elem_id="batch-sweep-steptime", label="Step time vs batch size")
            s_trade = gr.Plot(charts.tradeoff_chart([]), elem_id="batch-sweep-tradeoff", label="Throughput vs latency")
            s_table = gr.Markdown(elem_id="batch-sweep-table")
        with gr.Tab("2 · Padding"):
            p_text = gr.Textbox(DEFAULT_PADDING, lines=4, label="Prompts in one batch (one per line, up to 8)",
                                max_length=4000, elem_id="batch-pad-prompts")
            p_btn = gr.Button("Show the padded batch", elem_id="batch-pad-btn")
            first_pad = padding_view(lm, settings, DEFAULT_PADDING)  # tokenizer only: cheap
            p_md = gr.Markdown(first_pad[1], elem_id="batch-pad-text")
            p_plot = gr.Plot(first_pad[0], elem_id="batch-pad-plot", label="Padding")
        with gr.Tab("3 · Static vs continuous"):
            with gr.Row():
                c_work = gr.Dropdown(list(PRESETS) + [RANDOM], value=list(PRESETS)[0], label="Workload",
                                     elem_id="batch-sched-workload")
                c_batch = gr.Slider(1, 16, value=4, step=1, label="Max batch", elem_id="batch-sched-max")
                c_wait = gr.Slider(0, 5, value=1.0, step=0.25, label="Static: wait up to (s) for a batch to fill")
            with gr.Row():
                c_seed = gr.Number(0, precision=0, label="Seed (random trace)")
                c_n = gr.Slider(2, 24, value=10, step=1, label="Requests (random trace)")
                c_rate = gr.Slider(0.25, 8, value=2.0, step=0.25, label="Arrivals per second (random trace)")
            with gr.Row():
                c_btn = gr.Button("Serve the workload both ways", variant="primary", elem_id="batch-sched-btn")
                c_stop = gr.Button("Stop", variant="stop", elem_id="batch-sched-stop")
            c_progress = gr.Markdown(VIRTUAL_CLOCK, elem_id="batch-sched-progress")
            c_static = gr.Plot(charts.gantt_chart(None, ""), elem_id="batch-sched-static", label="Static batching timeline")
            c_cont = gr.Plot(charts.gantt_chart(None, ""), elem_id="batch-sched-continuous", label="Continuous batching timeline")
            c_summary = gr.Plot(charts.scheduler_summary_chart([]), elem_id="batch-sched-summary", label="Static vs continuous")
            c_table = gr.Markdown(elem_id="batch-sched-table")
        with gr.Tab("4 · Cost per request"):
            with gr.Row():
                k_price = gr.Number(0.10, label="Hardware price ($ per hour)", minimum=0, maximum=1000,
                                    elem_id="batch-cost-price")
                k_in = gr.Number(200, precision=0, label="Prompt tokens per conversation", minimum=0)
                k_out = gr.Number(300, precision=0, label="Output tokens per conversation", minimum=1)
            k_md = gr.Markdown("Run the batch sweep first: costs come from its measured throughput.",
                               elem_id="batch-cost-table")
            k_plot = gr.Plot(charts.cost_chart([], 0), elem_id="batch-cost-plot", label="Cost per million tokens")
    closing = gr.Markdown(closing_note(lm, None, None), elem_id="batch-closing")

    cost_inputs = [sweep_state, k_price, k_in, k_out]
    cost = guarded(lambda s, p, i, o: cost_view(lm, s, p, i, o))
    ev = s_btn.click(guarded(lambda m, n, b, c: sweep_frames(lm, settings, shared, m, n, b, c)),
                     [s_max, s_steps, s_budget, sched_state],
                     [s_progress, s_thr, s_step, s_trade, s_table, sweep_state, closing],
                     concurrency_id="heavy", concurrency_limit=1, time_limit=600, api_name="batch_sweep")
    ev.then(cost, cost_inputs, [k_plot, k_md], api_visibility="undocumented")
    s_stop.click(None, None, None, cancels=[ev])
    for control in (k_price, k_in, k_out):
        control.change(cost, cost_inputs, [k_plot, k_md], api_visibility="undocumented")
    p_btn.click(guarded(lambda t: padding_view(lm, settings, t)), [p_text], [p_plot, p_md], api_name="batch_padding")
    ev = c_btn.click(guarded(lambda *a: schedule_frames(lm, settings, shared, *a)),
                     [c_work, c_seed, c_n, c_rate, c_batch, c_wait, sweep_state],
                     [c_progress, c_static, c_cont, c_summary, c_table, sched_state, closing],
                     concurrency_id="heavy", concurrency_limit=1, time_limit=600, api_name="batch_schedulers")
    c_stop.click(None, None, None, cancels=[ev])
