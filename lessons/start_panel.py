"""'Start here' panel: the overview, the example prompts (tap one: 'Try it' opens with it
filled in) and the learner's path through the lessons, kept in their own browser."""
from __future__ import annotations

from collections.abc import Callable

import gradio as gr

from .common.context import AppContext
from .common.progress import progress_box, wire_progress
from .start_handlers import FIRST_STEP_MD, STARTERS, overview_md

CHAT_TAB, CHAT_PROMPT = "chat", "chat-prompt"  # where a starter prompt goes


def build(ctx: AppContext) -> Callable[[], None]:
    """'Start here' in the caller's tab. Returns the wiring to run once every tab is built
    (the starters fill 'Try it's prompt box; the path ticks every lesson tab)."""
    gr.Markdown(overview_md())
    gr.Markdown(FIRST_STEP_MD)
    with gr.Row(elem_id="start-prompts"):
        buttons = [gr.Button(p, size="sm", elem_classes=["lab-starter"]) for p in STARTERS]
    store, line = progress_box()

    def wire() -> None:
        prompt = next(b for b in ctx.demo.blocks.values()
                      if getattr(b, "elem_id", None) == CHAT_PROMPT)
        for button, text in zip(buttons, STARTERS):
            button.click(lambda t=text: (t, gr.Tabs(selected=CHAT_TAB)), None,
                         [prompt, ctx.tabs], scroll_to_output=True, queue=False,
                         api_visibility="private")
        wire_progress(ctx.demo, store, line)
    return wire
