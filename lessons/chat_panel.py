"""'Try it': a prompt, Generate, and the answer streaming in as a chat app shows it, with
time to first token and tokens/s measured live. This proves the whole path, browser to
model and back; the lessons then take it apart.

`generate_chat` is a plain generator of (chat history, stats line); `build()` wires it."""
from __future__ import annotations

from collections.abc import Iterator

import gradio as gr

from inference.config import Settings
from inference.generation import stream
from inference.sampling import SamplingSettings
from visualizations.timing_text import live_stats_md

from .controls import slider
from .feedback import guarded
from .prompt_input import encode_prompt


def generate_chat(lm, settings: Settings, prompt: str, max_new: int
                  ) -> Iterator[tuple[list[dict], str]]:
    """Stream a greedy answer: after each token, (chat messages, measured stats markdown)."""
    ids = encode_prompt(lm, settings, prompt)
    history = [{"role": "user", "content": prompt}, {"role": "assistant", "content": ""}]
    ttft, decode_s, n = None, 0.0, 0
    for ev in stream(lm, ids, SamplingSettings(), int(max_new)):
        if ev.index == 0:
            ttft = ev.seconds
        else:
            decode_s, n = decode_s + ev.seconds, n + 1
        ended = ev.finished == "end of turn"
        history[1]["content"] = ev.text.replace(lm.tokenizer.eos_token, "") if ended else ev.text
        yield history, live_stats_md(ttft, decode_s, n, len(ids))


def build(lm, settings: Settings) -> None:
    with gr.Row():
        with gr.Column(scale=3):
            prompt = gr.Textbox(label="Your prompt", lines=2, max_length=settings.max_prompt_chars,
                                value="Explain why the sky is blue in two sentences.",
                                elem_id="chat-prompt")
        with gr.Column(scale=1):
            max_new = slider(settings, "new_tokens", "Max new tokens")
    with gr.Row():
        go_btn = gr.Button("Generate", variant="primary", elem_id="chat-generate")
        stop_btn = gr.Button("Stop", variant="stop", elem_id="chat-stop")
    stats = gr.Markdown(live_stats_md(None, 0, 0, 0), elem_id="chat-stats")
    chat = gr.Chatbot(label="Streaming answer (greedy decoding)", height=320, elem_id="chat-box")

    def run(p: str, m: int) -> Iterator[dict]:
        for history, line in generate_chat(lm, settings, p, m):
            yield {chat: history, stats: line}

    ev = go_btn.click(guarded(run), [prompt, max_new], [chat, stats], concurrency_id="model",
                      time_limit=120, api_name="chat")
    stop_btn.click(None, None, None, cancels=[ev])
