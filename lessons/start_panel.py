"""'Start here' panel: the first screen (a live answer, each pass drawn, a cache race), then
the example prompts, the learner's path and "About this model"."""
from __future__ import annotations

from collections.abc import Callable

import gradio as gr

from inference.experiments.kv_race import race_tokens
from visualizations.cards import model_card_html
from visualizations.first_screen import empty_picture, live_cards_html, race_ratio_html

from . import start_handlers as run
from .common.context import AppContext
from .common.controls import prompt_box
from .common.exports import teachers_guide
from .common.feedback import guarded
from .common.lesson_text import lesson_page
from .common.measurement import Measurement, prompt_tokens
from .common.measurement_wiring import wire_measurement
from .common.named_outputs import showing
from .common.progress import progress_box, wire_progress

CHAT_TAB, CHAT_PROMPT = "chat", "chat-prompt"  # where a starter prompt goes
FIRST_WAIT = ("The model answers the prompt below as soon as the page has loaded: the prompt "
              "goes through its layers in one pass, then one token per step.")
TITLE = ("<div class='fs-title' role='heading' aria-level='1'>LLM inference, live: watch a "
         "real model answer, one token per step</div>")


def first_screen(ctx: AppContext) -> None:
    """The title, the live picture and cards beside the answer and the race, the prompt under
    them: one screen at 1280×720, 853×480 and 390×844."""
    lm, settings, server = ctx.lm, ctx.settings, ctx.server
    gr.HTML(TITLE, elem_id="start-title", padding=False)
    with gr.Row(elem_id="start-main"):
        with gr.Column(elem_id="start-picture-col"):
            diagram = gr.HTML(empty_picture(lm.info.layers, FIRST_WAIT, "live"),
                              elem_id="start-diagram", padding=False)
            cards = gr.HTML(live_cards_html(None, None, 0, 0), elem_id="start-cards",
                            padding=False)
        with gr.Column(elem_id="start-side"):
            answer = gr.Markdown("*The answer appears here, token by token.*",
                                 elem_id="start-answer")
            with gr.Row(elem_id="start-race-row"):
                race_btn = gr.Button("Now without the cache", variant="primary",
                                     elem_id="start-race")
                result = gr.Markdown(race_ratio_html(None), elem_id="start-race-result")
    with gr.Row(equal_height=True, elem_id="start-prompt-row"):
        prompt = prompt_box(settings, settings.default_prompt, "start-prompt", "Being answered "
                            "live: this prompt (change it, then press Answer)", 1, scale=4)
        go = gr.Button("Answer", variant="primary", scale=1, min_width=90, elem_id="start-go")
        stop = gr.Button("Stop", variant="stop", scale=1, min_width=70, elem_id="start-stop")
    live = showing({"diagram": diagram, "cards": cards, "answer": answer},
                   lambda p: run.live_frames(lm, settings, server, p))

    # the answer waits on the server's steps; the race's timed passes run alone
    answering = dict(concurrency_id="chat",
                     concurrency_limit=settings.server_rows + settings.server_queue,
                     time_limit=settings.long_time_limit_s, api_visibility="private")
    on_answer = gr.on([ctx.demo.load, go.click], guarded(live, compute=False), [prompt],
                      [diagram, cards, answer], **answering)
    racing = showing({"diagram": diagram, "result": result},
                     lambda p: run.live_race_frames(lm, settings, p))
    on_race = wire_measurement(race_btn, [prompt], [diagram, result], Measurement(
        "first_race", racing, work=lambda p: race_tokens(prompt_tokens(
            lm, settings, p, settings.race_max_prompt_tokens), settings.live_race_new_tokens)),
        ctx)
    stop.click(None, None, None, cancels=[on_answer, on_race])
    # Leaving Start here stops the answer too: its row is freed for the lesson's own runs.
    ctx.tabs.select(None, None, None, cancels=[on_answer], queue=False,
                    api_visibility="private")


def build(ctx: AppContext) -> Callable[[], None]:
    """'Start here' in the caller's tab; returns the wiring to run once every tab is built."""
    with gr.Column(elem_id="first-screen"):
        first_screen(ctx)
    gr.Markdown(lesson_page("overview.md"))  # its glossary terms linked
    gr.Markdown(run.FIRST_STEP_MD)
    with gr.Row(elem_id="start-prompts"):
        buttons = [gr.Button(p, size="sm", elem_classes=["lab-starter"]) for p in run.STARTERS]
    store, line = progress_box()
    with gr.Accordion("About this model", open=False, elem_id="about-model"):
        gr.Markdown(run.about_model_md(ctx.lm.info))
        gr.HTML(model_card_html(ctx.lm.info), elem_id="model-card")
    teachers_guide("start-guide")  # for a teacher deciding whether to use Present

    def wire() -> None:
        prompt = next(b for b in ctx.demo.blocks.values()
                      if getattr(b, "elem_id", None) == CHAT_PROMPT)
        for button, text in zip(buttons, run.STARTERS):
            button.click(lambda t=text: (t, gr.Tabs(selected=CHAT_TAB)), None,
                         [prompt, ctx.tabs], scroll_to_output=True, queue=False,
                         api_visibility="private")
        wire_progress(ctx.demo, store, line)
    return wire
