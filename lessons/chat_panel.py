"""'Try it': a prompt, Generate, and the answer streaming in as a chat app shows it, with
time to first token and tokens/s measured live. This proves the whole path, browser to
model and back; the lessons then take it apart."""
from __future__ import annotations

from typing import Iterator

import gradio as gr

from inference.config import Settings
from inference.generation import stream
from inference.sampling import SamplingSettings
from inference.tokens import prompt_ids

from .feedback import user_error


def live_stats(ttft: float | None, decode_seconds: float, decoded: int, prompt_tokens: int) -> str:
    """Markdown line: TTFT, time per output token and tokens/s, all measured."""
    if ttft is None:
        return "*Press **Generate**: the answer streams in token by token.*"
    tpot = decode_seconds / decoded if decoded else None
    rate = f"{1 / tpot:.1f} tokens/s" if tpot else "—"
    tpot_s = f"{tpot * 1000:.0f} ms" if tpot else "—"
    return (f"**Measured:** time to first token **{ttft * 1000:.0f} ms** (prefill of "
            f"{prompt_tokens} prompt tokens) · time per output token **{tpot_s}** · "
            f"decode speed **{rate}** · {decoded + 1} tokens generated")


def generate_chat(lm, settings: Settings, prompt: str, max_new: int) -> Iterator[tuple[list, str]]:
    try:
        ids = prompt_ids(lm.tokenizer, prompt, max_chars=settings.max_prompt_chars,
                         max_tokens=settings.max_prompt_tokens)
        events = stream(lm, ids, SamplingSettings(), int(max_new))
        history = [{"role": "user", "content": prompt}, {"role": "assistant", "content": ""}]
        ttft, decode_s, n = None, 0.0, 0
        for ev in events:
            if ev.index == 0:
                ttft = ev.seconds
            else:
                decode_s, n = decode_s + ev.seconds, n + 1
            shown = ev.text.replace(lm.tokenizer.eos_token, "") if ev.finished == "end of turn" else ev.text
            history[1]["content"] = shown
            yield history, live_stats(ttft, decode_s, n, len(ids))
    except Exception as exc:
        raise user_error(exc) from exc


def build(lm, settings: Settings) -> None:
    with gr.Row():
        with gr.Column(scale=3):
            prompt = gr.Textbox(label="Your prompt", lines=2, max_length=settings.max_prompt_chars,
                                value="Explain why the sky is blue in two sentences.",
                                elem_id="chat-prompt")
        with gr.Column(scale=1):
            max_new = gr.Slider(1, settings.max_new_tokens, value=settings.default_new_tokens, step=1,
                                label="Max new tokens")
    with gr.Row():
        go_btn = gr.Button("Generate", variant="primary", elem_id="chat-generate")
        stop_btn = gr.Button("Stop", variant="stop", elem_id="chat-stop")
    stats = gr.Markdown(live_stats(None, 0, 0, 0), elem_id="chat-stats")
    chat = gr.Chatbot(label="Streaming answer (greedy decoding)", height=320, elem_id="chat-box")

    def run(p, m):
        yield from generate_chat(lm, settings, p, m)

    ev = go_btn.click(run, [prompt, max_new], [chat, stats], concurrency_id="model",
                      time_limit=120, api_name="chat")
    stop_btn.click(None, None, None, cancels=[ev])
