"""Lesson 4b panel: the learner's own block pool, kept in a `gr.State` freed on close/idle."""
from __future__ import annotations

import gradio as gr

from . import pages_handlers as run
from .common.context import AppContext
from .common.controls import prompt_box, slider
from .common.feedback import guarded
from .common.named_outputs import showing


def build(ctx: AppContext) -> None:
    lm, settings = ctx.lm, ctx.settings
    first = run.frame()
    state = gr.State(None, time_to_live=settings.state_ttl_s, delete_callback=run.forget)
    with gr.Row():
        prompt = prompt_box(settings, "Name a river.", "pages-prompt", lines=1, scale=3)
        blocks = slider(settings, "paged_demo_blocks",
                        f"Blocks in the pool ({settings.paged_demo_block_tokens} tokens each)",
                        scale=1, elem_id="pages-blocks")
    with gr.Row():
        add = gr.Button("Add request", variant="primary", elem_id="pages-add")
        step = gr.Button("Step ▶| (one token for all)", elem_id="pages-step")
        finish = gr.Button("Finish the oldest", elem_id="pages-finish")
    with gr.Row():
        shared = gr.Button("Two prompts, one prefix", elem_id="pages-shared")
        fill = gr.Button("Fill the pool", elem_id="pages-fill")
        reset = gr.Button("New empty pool ↺", elem_id="pages-reset")
    shown = {"pool": state,
             "story": gr.Markdown(first.story, elem_id="pages-story"),
             "grid": gr.HTML(first.grid, elem_id="pages-grid"),
             "tables": gr.HTML(first.tables, elem_id="pages-tables"),
             "bytes_md": gr.Markdown(first.bytes_md, elem_id="pages-bytes")}
    outputs = list(shown.values())

    def wire(button: gr.Button, fn, inputs: list, api_name: str) -> None:
        button.click(guarded(showing(shown, fn)), inputs, outputs, concurrency_id="model",
                     time_limit=settings.measure_time_limit_s, api_name=api_name)

    wire(add, lambda demo, n, text: run.add(lm, settings, demo, n, text),
         [state, blocks, prompt], "pages_add")
    wire(step, lambda demo: run.step_all(lm, demo), [state], "pages_step")
    wire(finish, lambda demo: run.finish_oldest(lm, demo), [state], "pages_finish")
    wire(shared, lambda demo, n: run.shared_prefix(lm, settings, demo, n), [state, blocks],
         "pages_shared")
    wire(fill, lambda demo, n: run.fill(lm, settings, demo, n), [state, blocks], "pages_fill")
    wire(reset, lambda n: run.new_pool(lm, settings, n), [blocks], "pages_reset")
