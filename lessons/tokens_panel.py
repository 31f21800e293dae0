"""Lesson 1 panel: type text, see its tokens, counts, the chat template and the cost."""
from __future__ import annotations

import gradio as gr

from inference.config import Settings
from inference.errors import InferenceInputError
from inference.experiments.token_cost import token_cost
from inference.tokens import chat_prompt, clean_text, tokenize
from visualizations.token_view import token_counts_md, token_html

from .feedback import user_error
from .lesson_text import lesson_text

EXAMPLES = [
    ["The cat sat on the mat."],
    ["In 2024, 1234567 × 89 = 109876463."],
    ["Antidisestablishmentarianism is a floccinaucinihilipilification."],
    ["def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)"],
    ["I love pizza 🍕🍕 and rockets 🚀!"],
    ["Le chat dort sur le rebord de la fenêtre. 猫は窓辺で寝ています。"],
]


def show_tokens(tokenizer, text: str, with_template: bool, max_chars: int) -> tuple[str, str, str]:
    """(token HTML, counts line, template note) for the text as typed or as the model reads it."""
    text = text or ""
    if len(text) > max_chars:
        raise InferenceInputError(f"That text has {len(text):,} characters; the limit here is "
                                  f"{max_chars:,}. Try a shorter piece.")
    text = clean_text(text)
    plain = tokenize(tokenizer, text)
    if not with_template:
        return (token_html(plain.tokens), token_counts_md(text, len(plain.tokens)),
                "*Tick the box to see the same text wrapped in the chat template.*")
    wrapped = tokenize(tokenizer, chat_prompt(tokenizer, text))
    overhead = len(wrapped.tokens) - len(plain.tokens)
    note = (f"Wrapped in the chat template, your {len(plain.tokens)} tokens become "
            f"**{len(wrapped.tokens)}**: **{overhead}** tokens of role markers and the default "
            f"system message ({wrapped.special_count} special tokens), paid on every turn.")
    return (token_html(wrapped.tokens), token_counts_md(wrapped.text, len(wrapped.tokens),
                                                        wrapped.special_count), note)


def cost_md(tokenizer, text: str, output_tokens: float, price_in: float, price_out: float,
            max_chars: int = 20_000) -> str:
    """Markdown for the cost of one request with this prompt (chat template included)."""
    if len(text or "") > max_chars:
        raise InferenceInputError(f"That text has {len(text):,} characters; the limit here is "
                                  f"{max_chars:,}. Try a shorter piece.")
    text = clean_text(text or "")
    n_in = len(tokenize(tokenizer, chat_prompt(tokenizer, text)).tokens)
    c = token_cost(n_in, int(output_tokens), float(price_in), float(price_out))
    per_m_requests = c.total * 1e6
    return (f"**{c.input_tokens:,} input tokens** × ${price_in:g}/M = ${c.input_cost:.6f} · "
            f"**{c.output_tokens:,} output tokens** × ${price_out:g}/M = ${c.output_cost:.6f} · "
            f"**per request ${c.total:.6f}**, per million requests **${per_m_requests:,.0f}** "
            f"*(arithmetic: tokens × price per million ÷ 1,000,000)*")


def build(lm, settings: Settings, shared=None) -> None:
    gr.Markdown(lesson_text("lesson1_tokens.md"))
    text = gr.Textbox(label="Text to tokenize", lines=3, value=EXAMPLES[1][0],
                      max_length=settings.max_prompt_chars, elem_id="tok-text")
    gr.Examples(EXAMPLES, inputs=[text], label="Examples with surprising splits")
    template = gr.Checkbox(label="Show it as the model reads it (chat template)", value=False,
                           elem_id="tok-template")
    first_view, first_counts, first_note = show_tokens(lm.tokenizer, EXAMPLES[1][0], False,
                                                       settings.max_prompt_chars)
    counts = gr.Markdown(first_counts, elem_id="tok-counts")
    view = gr.HTML(first_view, elem_id="tok-view")
    note = gr.Markdown(first_note)
    with gr.Accordion("What would this cost? (cost estimator)", open=True):
        with gr.Row():
            out_tokens = gr.Number(label="Expected output tokens", value=300, minimum=0,
                                   maximum=100_000, precision=0)
            price_in = gr.Number(label="Input price ($ per million tokens)", value=0.50,
                                 minimum=0, maximum=1000)
            price_out = gr.Number(label="Output price ($ per million tokens)", value=1.50,
                                  minimum=0, maximum=1000)
        cost = gr.Markdown(cost_md(lm.tokenizer, EXAMPLES[1][0], 300, 0.50, 1.50), elem_id="tok-cost")

    def on_text(t, tpl):
        try:
            return show_tokens(lm.tokenizer, t, tpl, settings.max_prompt_chars)
        except Exception as exc:
            raise user_error(exc) from exc

    def on_cost(t, n, pi, po):
        try:
            return cost_md(lm.tokenizer, t, n or 0, pi or 0, po or 0, settings.max_prompt_chars)
        except Exception as exc:
            raise user_error(exc) from exc

    for trigger in (text.change, template.change):
        trigger(on_text, [text, template], [view, counts, note], trigger_mode="always_last",
                show_progress="hidden", api_name="tokenize")
    for trigger in (text.change, out_tokens.change, price_in.change, price_out.change):
        trigger(on_cost, [text, out_tokens, price_in, price_out], cost, trigger_mode="always_last",
                show_progress="hidden", api_name="token_cost")
