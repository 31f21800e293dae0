"""'Try it' panel: a prompt, Generate and Stop, and the answer streaming in, timed."""
from __future__ import annotations

from collections.abc import AsyncIterator

import gradio as gr

from classroom.client_address import LOCAL
from classroom.visitor_token import visitor_of
from visualizations.timing_text import live_stats_md

from .chat_handlers import EXAMPLES, generate_chat
from .common.context import AppContext
from .common.controls import prompt_box, slider
from .common.feedback import guarded
from .common.measurement_wiring import run_and_stop


def visitor_key(request: gr.Request | None, trusted_proxies: int) -> str:
    """Who is chatting, for the server's fair line: the visitor's signed token, else their
    address ("" on this machine itself, which is never capped)."""
    visitor = visitor_of(request, trusted_proxies) if request is not None else ""
    return "" if visitor in ("", f"a:{LOCAL}") else visitor


def build(ctx: AppContext) -> None:
    """'Try it' in the caller's tab (Start here's prompts fill its prompt box, by elem_id)."""
    lm, settings = ctx.lm, ctx.settings
    server = ctx.chat if ctx.chat is not None else ctx.server  # LLM_LAB_SERVE_URL's, or ours
    with gr.Row():
        with gr.Column(scale=3):
            prompt = prompt_box(settings, settings.default_prompt, "chat-prompt", "Your prompt")
        with gr.Column(scale=1):
            max_new = slider(settings, "new_tokens", "Max new tokens")
    gr.Examples(EXAMPLES, inputs=[prompt], label="Tap a prompt to try it")
    go_btn, stop_btn = run_and_stop("Generate", "chat-generate", "chat-stop")
    stats = gr.Markdown(live_stats_md(None, 0, 0, 0), elem_id="chat-stats")
    chat = gr.Chatbot(label="Streaming answer (greedy decoding)", height=320, elem_id="chat-box")

    async def run(p: str, m: int, request: gr.Request) -> AsyncIterator[dict]:
        async for frame in generate_chat(lm, settings, server, p, m,
                                            visitor_key(request, settings.trusted_proxies)):
            yield {chat: frame.history, stats: frame.stats}

    # many may wait on their request's events at once: the server's steps run the model
    ev = go_btn.click(guarded(run, compute=False), [prompt, max_new], [chat, stats],
                      concurrency_id="chat",
                      concurrency_limit=settings.server_rows + settings.server_queue,
                      time_limit=settings.long_time_limit_s, api_name="chat")
    stop_btn.click(None, None, None, cancels=[ev])
