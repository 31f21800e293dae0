"""The LLM inference teaching app: watch a real model serve text, one measured step at a time.
Layout and wiring only (the tabs are `lessons.TABS`); run `make run`."""
from __future__ import annotations

import importlib
import os
from dataclasses import replace

import gradio as gr

import classroom
from inference import compute_thread
from inference.config import Settings
from inference.experiments import batch_sweep
from inference.experiments.shared_results import SharedResults
from inference.loading import load_model
from inference.remote_engine import RemoteEngine
from inference.server import Server
from lessons import TABS
from lessons.common.context import AppContext
from lessons.common.lesson_text import lesson_page, lesson_text, page_script
from lessons.common.progress import lesson_footer, lesson_markdown, wire_links

SETTINGS = Settings.from_env()
# loaded on the compute thread, where every handler runs the model; read-only, shared by all
LM = compute_thread.run(load_model, SETTINGS)
# the server's rows: where this machine's batch sweep levels off, cut to what its pool holds
ROWS = batch_sweep.for_server(SETTINGS, LM)
SETTINGS = replace(SETTINGS, server_rows=ROWS.rows)
print(f"Server rows: {ROWS.rows} ({ROWS.why})", flush=True)
SHARED = SharedResults()  # finished sweeps, shared by all visitors of this process
compute_thread.idle.also(SHARED.release_idle)  # lesson 6's model copies go when idle
SERVER = Server(LM, SETTINGS)  # one continuous batcher: every visitor's chat goes through it
# LLM_LAB_SERVE_URL: Try it's chats go to that OpenAI-compatible engine instead (lessons stay here)
CHAT = RemoteEngine(SETTINGS.serve_url) if SETTINGS.serve_url else None
RUNS = classroom.SharedRuns(SETTINGS.shared_run_reuse_s)  # identical measurements share one run
SERVER.turns.measuring = RUNS.waiting_visitors  # a room waiting on a sweep outweighs a few chats


with gr.Blocks(title="LLM Inference, Step by Step",  # served files' copies are swept hourly
               delete_cache=(SETTINGS.file_cache_s, SETTINGS.file_cache_s)) as demo:
    # says what a ?lesson=…&prompt=… link asked for and did not get
    notice = gr.Markdown("", visible=False, elem_id="link-notice")
    # every tab visible (wrapped, not folded into a "⋯" menu) and sticky (assets/style.css)
    with gr.Tabs(elem_id="lesson-tabs", overflow_behavior="wrap") as tabs:
        ctx = AppContext(LM, SETTINGS, SHARED, SERVER, demo, tabs, chat=CHAT, runs=RUNS)
        later = []  # wiring that needs every tab built (Start here's prompts fill Try it's box)
        for tab in TABS:
            with gr.Tab(tab.label, id=tab.id):
                if tab.text:
                    lesson_markdown(lesson_page(tab.text, LM.info), f"{tab.id}-lesson-text")
                later.append(importlib.import_module(tab.panel).build(ctx))
                if tab.words:
                    lesson_footer(tab.id, tabs)
    for wire in filter(None, later):
        wire()
    wire_links(demo, tabs, notice, SETTINGS.max_prompt_chars)
    page_script(demo, "chart_csv.js")  # a "Data as CSV" button on every chart it finds
    # Gradio's scroll_to_output aims at the sticky tab strip, always "in view": this script
    # lands tab and Next clicks on the lesson's start, opens linked glossary terms
    page_script(demo, "lesson_scroll.js")

demo.queue(max_size=SETTINGS.queue_size, default_concurrency_limit=2)
classroom.install(demo, SETTINGS, classroom.Fairness(SETTINGS, RUNS))


def launch_options() -> dict:
    """Bind to loopback unless told otherwise; Spaces sets GRADIO_SERVER_NAME itself."""
    return dict(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                share=False, show_error=False, max_file_size="1mb",
                css=lesson_text("style.css") + lesson_text("presenter.css"),
                # the first screen's answers wait on the server in threads: room for all
                max_threads=SETTINGS.server_rows + SETTINGS.server_queue + 40,
                app_kwargs={"middleware": classroom.middleware(SETTINGS)},
                theme=gr.themes.Soft(font=["system-ui", "sans-serif"],
                                     font_mono=["ui-monospace", "monospace"]))


if __name__ == "__main__":
    demo.launch(**launch_options())
