"""'This machine' panel: the live server view, then one button measuring the roofline."""
from __future__ import annotations

from collections.abc import Iterator

import gradio as gr

from inference.config import Settings
from inference.experiments.roofline import ROOFLINE_PROMPT, roofline_tokens
from inference.tokens import prompt_ids
from visualizations import server_view
from visualizations.roofline_charts import two_roof_figure
from visualizations.server_view import server_pool_parts
from visualizations.step_charts import step_bound_md, step_split_figure
from visualizations.style import empty_figure, info_caption

from .common.context import AppContext
from .common.exports import figures_box
from .common.feedback import guarded
from .common.latest import SharedSnapshot
from .common.lesson_text import lesson_text
from .common.measurement import Measurement
from .common.measurement_wiring import wire_measurement
from .common.named_outputs import keyed
from .common.serving_peer import serving_comparison
from .machine_handlers import gpu_note_md, measure_machine_steps


def server_section(lm, settings: Settings, server, texts: list[str], chat=None) -> None:
    """The live view of the real scheduler serving this room (polled while switched on)."""
    server_md, pages_md, budget_md = texts
    gr.Markdown(server_md)
    with gr.Row():
        watch = gr.Checkbox(False, elem_id="server-watch",
                            label=f"Watch live (updates every {settings.watch_interval_s:g} s)")
        refresh = gr.Button("Refresh now", elem_id="server-refresh")
    rows, window_s = settings.server_rows, settings.server_window_s
    text = gr.Markdown(server_view.server_stats_md(None, rows, window_s), elem_id="server-stats")
    chart = gr.Plot(server_view.batch_history_figure(None), label="Batch size over time",
                    elem_id="server-chart")
    gr.Markdown("### The same class, served by vLLM\n"
                + server_view.peer_comparison_md(serving_comparison()), elem_id="server-vs-vllm")
    gr.Markdown(pages_md)
    grid0, tables0, bytes0 = server_pool_parts(None)
    with gr.Row():
        grid = gr.HTML(grid0, elem_id="server-pool")
        pool_bytes = gr.Markdown(bytes0, elem_id="server-pool-bytes")
    tables = gr.HTML(tables0, elem_id="server-pool-tables")
    gr.Markdown(budget_md)
    budget = gr.Plot(server_view.budget_split_figure((), 0), label="Tokens per step",
                     elem_id="server-budget")
    parts = gr.Plot(server_view.step_parts_figure(()), label="Time per step",
                    elem_id="server-parts")
    timer = gr.Timer(settings.watch_interval_s, active=False)
    outputs = [text, chart, grid, tables, pool_bytes, budget, parts]

    def snapshot() -> dict:
        st = server.stats()
        cap = info_caption(lm.info, alone=False, note="live scheduler")
        head = server_view.remote_stats_md(chat.stats()) + "\n\n" if chat is not None else ""
        pool = server_pool_parts(st, "The pool of the server serving this room, now.")
        return {text: head + server_view.server_stats_md(st, rows, window_s),
                chart: server_view.batch_history_figure(st, cap), **dict(zip(outputs[2:5], pool)),
                budget: server_view.budget_split_figure(st.steps_detail, st.step_token_budget, cap),
                parts: server_view.step_parts_figure(st.steps_detail, cap)}

    live = SharedSnapshot(snapshot, settings.watch_interval_s)  # one per interval, every tab
    checked = guarded(live.get, compute=False)  # no model: answers while a measurement runs
    refresh.click(checked, None, outputs, api_name="server_stats")
    timer.tick(checked, None, outputs, show_progress="hidden",
               api_visibility="undocumented")
    watch.change(guarded(lambda on: gr.Timer(active=bool(on)), compute=False), watch, timer,
                 api_visibility="undocumented")


def build(ctx: AppContext) -> None:
    lm, settings, shared, server = ctx.lm, ctx.settings, ctx.shared, ctx.server
    extra = {"step_token_budget": str(settings.step_token_budget)}
    texts = lesson_text("machine.md", extra=extra).split("<!-- part -->")  # sections, in order
    if server is not None:
        server_section(lm, settings, server, texts[:3], ctx.chat)
    roofline_md, roofs_md, bound_md = texts[3:]
    gr.Markdown(roofline_md)
    run = gr.Button("Measure this machine", variant="primary", elem_id="perf-run")
    text = gr.Markdown("*Press the button: it measures in three parts and says here which one "
                       "it is on.*", elem_id="perf-result")
    chart = gr.Plot(empty_figure("The roofline appears here after measuring."), label="Roofline",
                    elem_id="perf-chart")
    gr.Markdown(roofs_md)
    compute_text = gr.Markdown(elem_id="perf-compute")
    compute_chart = gr.Plot(two_roof_figure(None), label="Roofline with both roofs",
                            elem_id="perf-compute-chart")
    gr.Markdown(bound_md)
    step_text = gr.Markdown(step_bound_md(None, 0, 0, 0), elem_id="perf-step")
    step_chart = gr.Plot(step_split_figure(None, 0), label="One decode step, split",
                         elem_id="perf-step-chart")
    sizes = gr.Markdown("### Choosing a model size\n*Press **Measure this machine**: the table "
                        "uses this machine's bandwidth.*", elem_id="perf-sizes")
    gr.Markdown(gpu_note_md(lm), elem_id="perf-gpu")
    shown = {"roofline_md": text, "roofline_chart": chart, "compute_md": compute_text,
             "compute_chart": compute_chart, "step_md": step_text, "step_chart": step_chart,
             "sizes_md": sizes, "figures_md": figures_box(lm, shared)}

    def on_run() -> Iterator[dict]:
        for v in measure_machine_steps(lm, shared):  # three parts, the server between them
            yield {text: v} if isinstance(v, str) else keyed(shown, v)

    wire_measurement(run, None, list(shown.values()), Measurement(
        "roofline", on_run, work=lambda: roofline_tokens(
            len(prompt_ids(lm.tokenizer, ROOFLINE_PROMPT)), lm.device.type == "cuda")), ctx)
