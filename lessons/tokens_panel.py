"""Lesson 1 panel: type text, see its tokens, counts, the chat template and the cost.

`show_tokens` and `cost_md` are plain functions (tested on the real tokenizer); `build()` lays
out the two sections, the token view and the cost estimator, and wires them."""
from __future__ import annotations

from typing import NamedTuple

import gradio as gr

from inference.config import LIMITS, Settings
from inference.errors import PromptTooLongError
from inference.experiments.token_cost import conversation_costs, token_cost
from inference.tokens import clean_text, tokenize, tokenize_chat
from visualizations.token_view import (
    conversation_cost_md,
    template_note_md,
    token_cost_md,
    token_counts_md,
    token_html,
)

from .common.controls import number, slider
from .common.feedback import guarded
from .common.lesson_text import lesson_text

EXAMPLES = [
    ["The cat sat on the mat."],
    ["In 2024, 1234567 × 89 = 109876463."],
    ["Antidisestablishmentarianism is a floccinaucinihilipilification."],
    ["def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)"],
    ["I love pizza 🍕🍕 and rockets 🚀!"],
    ["Le chat dort sur le rebord de la fenêtre. 猫は窓辺で寝ています。"],
]
FIRST_TEXT = EXAMPLES[1][0]
OUTPUT_PRICE_PER_M = 1.50  # output tokens usually cost a few times more than input tokens


class TokenView(NamedTuple):
    """What the token section shows for one text."""

    html: str  # the coloured token tiles
    counts: str  # characters, words, tokens (markdown)
    note: str  # what the chat template adds (markdown)


def _checked_text(text: str | None, max_chars: int) -> str:
    text = text or ""
    if len(text) > max_chars:
        raise PromptTooLongError(f"That text has {len(text):,} characters; the limit here is "
                                 f"{max_chars:,}. Try a shorter piece.")
    return clean_text(text)


def show_tokens(tokenizer, text: str, with_template: bool, max_chars: int) -> TokenView:
    """The text's tokens as typed, or as the model reads it (wrapped in the chat template)."""
    text = _checked_text(text, max_chars)
    plain = tokenize(tokenizer, text)
    if not with_template:
        return TokenView(token_html(plain.tokens), token_counts_md(text, len(plain.tokens)),
                         "*Tick the box to see the same text wrapped in the chat template.*")
    wrapped = tokenize_chat(tokenizer, text)
    return TokenView(token_html(wrapped.tokens),
                     token_counts_md(wrapped.text, len(wrapped.tokens), wrapped.special_count),
                     template_note_md(len(plain.tokens), len(wrapped.tokens),
                                      wrapped.special_count))


def cost_md(tokenizer, text: str, output_tokens: float, price_in: float, price_out: float,
            max_chars: int = LIMITS.max_prompt_chars) -> str:
    """Markdown for the cost of one request with this prompt (chat template included)."""
    text = _checked_text(text, max_chars)
    n_in = len(tokenize_chat(tokenizer, text).tokens)
    cost = token_cost(n_in, int(output_tokens), float(price_in), float(price_out))
    return token_cost_md(cost, price_in, price_out)


def _token_section(lm, settings: Settings) -> tuple[gr.Textbox, gr.Checkbox]:
    text = gr.Textbox(label="Text to tokenize", lines=3, value=FIRST_TEXT,
                      max_length=settings.max_prompt_chars, elem_id="tok-text")
    gr.Examples(EXAMPLES, inputs=[text], label="Examples with surprising splits")
    template = gr.Checkbox(label="Show it as the model reads it (chat template)", value=False,
                           elem_id="tok-template")
    first = show_tokens(lm.tokenizer, FIRST_TEXT, False, settings.max_prompt_chars)
    counts = gr.Markdown(first.counts, elem_id="tok-counts")
    view = gr.HTML(first.html, elem_id="tok-view")
    note = gr.Markdown(first.note)

    def on_text(t: str, with_template: bool) -> dict:
        shown = show_tokens(lm.tokenizer, t, with_template, settings.max_prompt_chars)
        return {view: shown.html, counts: shown.counts, note: shown.note}

    for trigger in (text.change, template.change):  # the tokenizer only: off the compute thread
        trigger(guarded(on_text, compute=False), [text, template], [view, counts, note],
                trigger_mode="always_last", show_progress="hidden", api_name="tokenize")
    return text, template


def conversation_md(tokenizer, text: str, output_tokens: float, price_in: float,
                    price_out: float, turns: float,
                    max_chars: int = LIMITS.max_prompt_chars) -> str:
    """The multi-turn table: this text as every question (chat template included), the
    expected output as every answer."""
    n_in = len(tokenize_chat(tokenizer, _checked_text(text, max_chars)).tokens)
    return conversation_cost_md(conversation_costs(n_in, int(output_tokens), int(turns),
                                                   float(price_in), float(price_out)))


def _cost_section(lm, settings: Settings, text: gr.Textbox) -> None:
    with gr.Accordion("What would this cost? (cost estimator)", open=True):
        with gr.Row():
            out_tokens = number(settings, "cost_output_tokens", "Expected output tokens")
            price_in = number(settings, "token_price_per_m", "Input price ($ per million tokens)")
            price_out = number(settings, "token_price_per_m",
                               "Output price ($ per million tokens)", value=OUTPUT_PRICE_PER_M)
        cost = gr.Markdown(cost_md(lm.tokenizer, FIRST_TEXT, out_tokens.value, price_in.value,
                                   price_out.value), elem_id="tok-cost")
        gr.Markdown("**A conversation, turn by turn.** Every turn resends the whole chat so far: "
                    "here each question is as long as the text above and each answer as long "
                    "as the expected output.")
        turns = slider(settings, "conversation_turns", "Turns in the conversation",
                       elem_id="tok-turns")
        convo = gr.Markdown(conversation_md(lm.tokenizer, FIRST_TEXT, out_tokens.value,
                                            price_in.value, price_out.value, turns.value),
                            elem_id="tok-conversation")

    def on_cost(t: str, n: float | None, p_in: float | None, p_out: float | None) -> str:
        return cost_md(lm.tokenizer, t, n or 0, p_in or 0, p_out or 0, settings.max_prompt_chars)

    def on_convo(t: str, n: float | None, p_in: float | None, p_out: float | None,
                 k: float) -> str:
        return conversation_md(lm.tokenizer, t, n or 0, p_in or 0, p_out or 0, k,
                               settings.max_prompt_chars)

    for trigger in (text.change, out_tokens.change, price_in.change, price_out.change):
        trigger(guarded(on_cost, compute=False), [text, out_tokens, price_in, price_out], cost,
                trigger_mode="always_last", show_progress="hidden", api_name="token_cost")
    gr.on([text.change, out_tokens.change, price_in.change, price_out.change, turns.release,
           turns.input], guarded(on_convo, compute=False),
          [text, out_tokens, price_in, price_out, turns], convo,
          trigger_mode="always_last", show_progress="hidden", api_name="conversation_cost")


def build(lm, settings: Settings, shared=None) -> None:
    gr.Markdown(lesson_text("lesson1_tokens.md", lm.info))
    text, _template = _token_section(lm, settings)
    _cost_section(lm, settings, text)
