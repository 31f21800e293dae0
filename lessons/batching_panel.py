"""Lesson 5 panel: a sub-tab each for the batch sweep, padding, scheduling and token cost."""
from __future__ import annotations

from typing import NamedTuple

import gradio as gr
from gradio.events import Dependency

from inference.config import Settings
from inference.experiments.batch_sweep import batch_sweep_tokens, memory_budget_bytes, sweep_sizes
from inference.experiments.schedulers import PRESETS, schedulers_tokens
from visualizations import batching_charts as charts
from visualizations import batching_text as text
from visualizations.mechanism import batch_diagram
from visualizations.server_view import peer_comparison_md

from . import batching_handlers as run
from .common.context import AppContext
from .common.controls import guess_box, number, prompt_box, slider
from .common.exports import wire_batch_csv
from .common.feedback import guarded
from .common.latest import LAST_MODES, latest
from .common.measurement import Measurement, prompt_tokens, shrunk
from .common.measurement_wiring import run_and_stop, wire_stoppable
from .common.named_outputs import showing
from .common.serving_peer import serving_comparison

DEFAULT_PADDING = ("Hi!\nWhat is the capital of France?\n"
                   "Write a haiku about autumn leaves falling slowly.")


class SharedStates(NamedTuple):  # the last sweep and schedules, the closing note quoting both
    sweep: gr.State
    schedules: gr.State
    closing: gr.Markdown


def sweep_tab(ctx: AppContext, measured: SharedStates) -> Dependency:
    """1 · Batch sweep: throughput and step time against batch size. Returns the run event."""
    lm, settings, shared = ctx.lm, ctx.settings, ctx.shared
    with gr.Row():
        largest = gr.Dropdown(sweep_sizes(int(settings.batch.high)), value=settings.batch.default,
                              label="Largest batch", elem_id="batch-sweep-max")
        steps = slider(settings, "sweep_decode_steps", "Timed decode steps per batch size",
                       elem_id="batch-sweep-steps")
        budget = number(settings, "memory_budget_mb",
                        "Memory budget (MB; default: half the free memory)",
                        value=memory_budget_bytes(lm.device, 0.5) // 10**6,
                        elem_id="batch-sweep-budget")
    guess = guess_box(settings, run.GUESS_KEY, "at the largest batch, how many times the batch-1 "
                      "tokens/s in total", "batch-sweep-guess")
    start, stop = run_and_stop("Run sweep", "batch-sweep-btn", "batch-sweep-stop")
    shown = {"progress": gr.Markdown(elem_id="batch-sweep-progress"),
             # the headline numbers right under the button, where a phone shows them with it
             "cards": gr.Markdown(text.NO_SWEEP_CARDS, elem_id="batch-cards"),
             "throughput": gr.Plot(charts.throughput_chart([]), elem_id="batch-sweep-throughput",
                                   label="Throughput vs batch size"),
             "diagram": gr.HTML(batch_diagram([], lm.info.layers), elem_id="batch-sweep-diagram"),
             "step_time": gr.Plot(charts.step_time_chart([], 0), elem_id="batch-sweep-steptime",
                                  label="Step time vs batch size"),
             "tradeoff": gr.Plot(charts.tradeoff_chart([]), elem_id="batch-sweep-tradeoff",
                                 label="Throughput vs latency"),
             "table": gr.Markdown(elem_id="batch-sweep-table"),
             # under the charts: above them it pushed the throughput chart off the screen
             "plan": gr.Markdown(elem_id="batch-sweep-plan"),
             "sweep": measured.sweep, "closing": measured.closing}
    handler = showing(shown, lambda data: run.sweep_frames(
        lm, settings, shared, max_batch=data[largest], steps=data[steps],
        budget_mb=data[budget], schedules=data[measured.schedules], guess=data[guess]))
    def smaller(data):  # the class-sized sweep, when the measurement line is long
        most = max(b for b in sweep_sizes(int(settings.batch.high))
                   if b <= max(1, int(data[largest]) // settings.class_share))
        few = shrunk(data[steps], settings.sweep_decode_steps.low, settings.class_share)
        return ({**data, largest: most, steps: few},), (
            f"batches up to {most} with {few} timed steps each, not up to "
            f"{int(data[largest])} with {int(data[steps])}")
    ev = wire_stoppable(start, stop, {largest, steps, budget, measured.schedules, guess},
                        list(shown.values()), Measurement(
        "batch_sweep", handler, work=lambda data: batch_sweep_tokens(
            prompt_tokens(lm, settings, run.SWEEP_PROMPT), int(data[largest]),
            int(data[steps])), limit="long", smaller=smaller), ctx)
    wire_batch_csv(lm, shared, ev, measured.sweep)  # the charts' data as CSV, once finished
    return ev


def padding_tab(lm, settings: Settings) -> None:
    """2 · Padding: how many positions a batched prefill spends on filler."""
    prompts = prompt_box(settings, DEFAULT_PADDING, "batch-pad-prompts",
                         f"Prompts in one batch (one per line, up to {settings.max_lines})", 4)
    show = gr.Button("Show the padded batch", elem_id="batch-pad-btn")
    first = run.padding_view(lm, settings, DEFAULT_PADDING)  # tokenizer only: cheap
    shown = {"text": gr.Markdown(first.text, elem_id="batch-pad-text"),
             "plot": gr.Plot(first.plot, elem_id="batch-pad-plot", label="Padding")}
    handler = showing(shown, lambda t: run.padding_view(lm, settings, t))
    show.click(guarded(handler, compute=False), [prompts], list(shown.values()),
               api_name="batch_padding")


def schedulers_tab(ctx: AppContext, measured: SharedStates) -> None:
    """3 · Static vs continuous: one workload served both ways on a virtual clock."""
    lm, settings, shared = ctx.lm, ctx.settings, ctx.shared
    with gr.Row():
        workload = gr.Dropdown([*PRESETS, run.RANDOM], value=next(iter(PRESETS)),
                               label="Workload", elem_id="batch-sched-workload")
        max_batch = slider(settings, "scheduler_batch", "Max batch", elem_id="batch-sched-max")
        wait = slider(settings, "fill_wait_s", "Static: wait up to (s) for a batch to fill")
    with gr.Row():
        seed = number(settings, "seed", "Seed (random trace)")
        requests = slider(settings, "trace_requests", "Requests (random trace)")
        rate = slider(settings, "trace_rate_per_s", "Arrivals per second (random trace)")
    start, stop = run_and_stop("Serve the workload both ways", "batch-sched-btn",
                                "batch-sched-stop")
    shown = {"progress": gr.Markdown(text.VIRTUAL_CLOCK, elem_id="batch-sched-progress"),
             "static": gr.Plot(charts.gantt_chart(None, ""), elem_id="batch-sched-static",
                               label="Static batching timeline"),
             "continuous": gr.Plot(charts.gantt_chart(None, ""),
                                   elem_id="batch-sched-continuous",
                                   label="Continuous batching timeline"),
             "summary": gr.Plot(charts.scheduler_summary_chart([]), elem_id="batch-sched-summary",
                                label="Static vs continuous"),
             "table": gr.Markdown(elem_id="batch-sched-table"),
             "schedules": measured.schedules, "closing": measured.closing}
    gr.Markdown("#### Continuous batching for real: this app against vLLM's CPU backend\n"
                + peer_comparison_md(serving_comparison()), elem_id="batch-vs-vllm")
    handler = showing(shown, lambda data: run.schedule_frames(
        lm, settings, shared, workload=data[workload], seed=data[seed],
        requests=data[requests], rate_per_s=data[rate], max_batch=data[max_batch],
        fill_wait_s=data[wait], sweep=data[measured.sweep]))

    def work(data) -> int:
        trace, _ = run.workload_trace(lm, settings, data[workload], data[seed], data[requests],
                                      data[rate])
        return schedulers_tokens([len(r.prompt_ids) for r in trace],
                                 [r.max_new_tokens for r in trace])
    inputs = {workload, max_batch, wait, seed, requests, rate, measured.sweep}
    wire_stoppable(start, stop, inputs, list(shown.values()),
                   Measurement("batch_schedulers", handler, work, limit="long"), ctx)


def cost_tab(lm, settings: Settings, measured: SharedStates, sweep_event: Dependency,
             page: gr.Tab, shared=None) -> None:
    """4 · Cost per request: the sweep (and lesson 6's modes) priced at an hourly rate, redrawn
    when `page` opens: lesson 6 may have measured meanwhile."""
    with gr.Row():
        price = number(settings, "price_per_hour", "Hardware price ($ per hour)",
                       elem_id="batch-cost-price")
        prompt_tokens = number(settings, "conversation_prompt_tokens",
                               "Prompt tokens per conversation")
        output_tokens = number(settings, "conversation_output_tokens",
                               "Output tokens per conversation")
    guess = guess_box(settings, run.COST_GUESS_KEY, "a million output tokens at the largest "
                      "batch", "batch-cost-guess")
    first = run.cost_view(lm, settings, None, price_per_hour=price.value,  # no sweep yet
                          prompt_tokens=prompt_tokens.value, output_tokens=output_tokens.value)
    shown = {"table": gr.Markdown(first.table, elem_id="batch-cost-table"),
             "plot": gr.Plot(first.plot, label="Cost per million tokens",
                             elem_id="batch-cost-plot"),
             "chain": gr.Markdown(first.chain, elem_id="batch-cost-chain")}
    inputs = {measured.sweep, price, prompt_tokens, output_tokens, guess}
    cost = guarded(showing(shown, lambda data: run.cost_view(
        lm, settings, data[measured.sweep], price_per_hour=data[price],
        prompt_tokens=data[prompt_tokens], output_tokens=data[output_tokens],
        modes=latest(lm, shared, LAST_MODES), guess=data[guess])), compute=False)
    for event in (sweep_event.then, page.select, price.change, prompt_tokens.change,
                  output_tokens.change, guess.change):
        event(cost, inputs, list(shown.values()), api_visibility="undocumented")


def build(ctx: AppContext) -> None:
    lm, settings, shared = ctx.lm, ctx.settings, ctx.shared
    measured = SharedStates(sweep=gr.State(None), schedules=gr.State(None),
                            closing=gr.Markdown(text.closing_note(lm.info, None, None),
                                                elem_id="batch-closing", render=False))
    with gr.Tabs(overflow_behavior="wrap"):  # every sub-tab one tap away on a phone
        with gr.Tab("1 · Batch sweep"):
            sweep_event = sweep_tab(ctx, measured)
        with gr.Tab("2 · Padding"):
            padding_tab(lm, settings)
        with gr.Tab("3 · Static vs continuous"):
            schedulers_tab(ctx, measured)
        with gr.Tab("4 · Cost per request") as cost_page:
            cost_tab(lm, settings, measured, sweep_event, cost_page, shared)
    measured.closing.render()  # below the sub-tabs; the sweep and the schedulers update it
