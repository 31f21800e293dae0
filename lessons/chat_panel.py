"""'Try it': a prompt, Generate, and the answer streaming in as a chat app shows it, with
time to first token and tokens/s measured live. This proves the whole path, browser to
model and back; the lessons then take it apart.

Every answer is served by the app's one continuous batcher (`inference.server.Server`): the
request joins whatever batch is running for the other visitors, and the line under the answer
says how many requests shared its forward passes. `generate_chat` is a plain generator of
`ChatFrame`s; `build()` wires it. Stop or a closed tab frees the row at the next step."""
from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import gradio as gr

from inference.config import Settings
from inference.sampling import SamplingSettings
from inference.tokens import clean_text
from visualizations.server_view import limit_note, shared_steps_note, waiting_md
from visualizations.timing_text import live_stats_md

from .common.controls import slider
from .common.feedback import guarded
from .common.prompt_input import encode_prompt

EXAMPLES = [["Explain why the sky is blue in two sentences."], ["What is 1234 * 5678?"],
            ["Translate to French: The cat sleeps on the warm windowsill."],
            ["def fibonacci(n):"], ["Tell me a story about a robot 🤖 who loves gardening 🌱"]]


@dataclass(frozen=True)
class ChatFrame:
    history: list[dict]  # the chat as messages: the visitor's prompt, the answer so far
    stats: str  # measured TTFT / time per token / tokens/s, then the batching line


def generate_chat(lm, settings: Settings, server, prompt: str, max_new: int
                  ) -> Iterator[ChatFrame]:
    """Stream a greedy answer from the shared server. Times are what this visitor experienced:
    TTFT from pressing Generate (queue and prefill), then the wall time between tokens."""
    ids = encode_prompt(lm, settings, prompt)
    shown = clean_text(prompt)  # echo the cleaned text (a lone surrogate cannot be sent back)
    history = [{"role": "user", "content": shown}, {"role": "assistant", "content": ""}]
    if isinstance(max_new, float) and max_new.is_integer():
        max_new = int(max_new)
    req = server.submit(ids, SamplingSettings(), max_new)
    yield ChatFrame([dict(m) for m in history], waiting_md(req.ahead))
    ttft, last, decode_s, n = None, None, 0.0, 0
    try:
        for ev in req.events():
            now = time.perf_counter()
            if ev.index == 0:
                ttft = now - req.submitted
            else:
                decode_s, n = decode_s + (now - last), n + 1
            last = now
            ended = ev.finished == "end of turn"
            history[1]["content"] = (ev.text.replace(lm.tokenizer.eos_token, "") if ended
                                     else ev.text)
            lines = [live_stats_md(ttft, decode_s, n, len(ids)),
                     shared_steps_note(req.mean_batch_rows, req.queued_seconds),
                     limit_note(ev.finished, req.max_new_tokens)]
            yield ChatFrame([dict(m) for m in history], "  \n".join(x for x in lines if x))
    finally:
        req.cancel()  # Stop, a closed tab or an error: the row is freed at the next step


def build(lm, settings: Settings, server) -> gr.Textbox:
    """'Try it' in the caller's tab; returns the prompt box (Start here's prompts fill it)."""
    with gr.Row():
        with gr.Column(scale=3):
            prompt = gr.Textbox(label="Your prompt", lines=2, max_length=settings.max_prompt_chars,
                                value="Explain why the sky is blue in two sentences.",
                                elem_id="chat-prompt")
        with gr.Column(scale=1):
            max_new = slider(settings, "new_tokens", "Max new tokens")
    gr.Examples(EXAMPLES, inputs=[prompt], label="Tap a prompt to try it")
    with gr.Row():
        go_btn = gr.Button("Generate", variant="primary", elem_id="chat-generate")
        stop_btn = gr.Button("Stop", variant="stop", elem_id="chat-stop")
    stats = gr.Markdown(live_stats_md(None, 0, 0, 0), elem_id="chat-stats")
    chat = gr.Chatbot(label="Streaming answer (greedy decoding)", height=320, elem_id="chat-box")

    def run(p: str, m: int) -> Iterator[dict]:
        for frame in generate_chat(lm, settings, server, p, m):
            yield {chat: frame.history, stats: frame.stats}

    # Handlers only wait on their request's events: many may wait at once, one model runs.
    # compute=False: it waits for the server's steps, which run on the compute thread.
    ev = go_btn.click(guarded(run, compute=False), [prompt, max_new], [chat, stats],
                      concurrency_id="chat",
                      concurrency_limit=settings.server_rows + settings.server_queue,
                      time_limit=600, api_name="chat")
    stop_btn.click(None, None, None, cancels=[ev])
    return prompt
