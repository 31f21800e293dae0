"""Lesson 1 panel: type text, see its tokens, counts, the chat template and the cost."""
from __future__ import annotations

import gradio as gr

from . import tokens_handlers as run
from .common.context import AppContext
from .common.controls import number, prompt_box, slider
from .common.feedback import guarded
from .common.named_outputs import showing


def build(ctx: AppContext) -> None:
    lm, settings = ctx.lm, ctx.settings
    # the text, its counts and tokens on one phone screen; the template and examples under them
    text = prompt_box(settings, run.FIRST_TEXT, "tok-text", "Text to tokenize", 3)
    first = run.show_tokens(lm.tokenizer, run.FIRST_TEXT, False, settings.max_prompt_chars)
    counts = gr.Markdown(first.counts, elem_id="tok-counts")
    view = gr.HTML(first.html, elem_id="tok-view")
    template = gr.Checkbox(label="Show it as the model reads it (chat template)", value=False,
                           elem_id="tok-template")
    note = gr.Markdown(first.note)
    gr.Examples(run.EXAMPLES, inputs=[text], label="Examples with surprising splits")
    on_text = showing({"html": view, "counts": counts, "note": note}, lambda t, with_template:
                      run.show_tokens(lm.tokenizer, t, with_template, settings.max_prompt_chars))
    gr.on([text.change, template.change], guarded(on_text, compute=False),  # tokenizer only:
          [text, template], [view, counts, note],  # off the compute thread, one endpoint
          trigger_mode="always_last", show_progress="hidden", api_name="tokenize")

    with gr.Accordion("What would this cost? (cost estimator)", open=True):
        with gr.Row():
            out_tokens = number(settings, "cost_output_tokens", "Expected output tokens")
            price_in = number(settings, "token_price_per_m", "Input price ($ per million tokens)")
            price_out = number(settings, "token_price_per_m",
                               "Output price ($ per million tokens)", value=run.OUTPUT_PRICE_PER_M)
        cost = gr.Markdown(run.cost_md(lm.tokenizer, run.FIRST_TEXT, out_tokens.value,
                                       price_in.value, price_out.value), elem_id="tok-cost")
        gr.Markdown("**A conversation, turn by turn.** Every turn resends the whole chat so far: "
                    "each question here is the text above, each answer the expected output.")
        turns = slider(settings, "conversation_turns", "Turns in the conversation",
                       elem_id="tok-turns")
        convo = gr.Markdown(run.conversation_md(lm.tokenizer, run.FIRST_TEXT, out_tokens.value,
                                                price_in.value, price_out.value, turns.value),
                            elem_id="tok-conversation")

    def on_cost(t: str, n: float | None, p_in: float | None, p_out: float | None) -> str:
        return run.cost_md(lm.tokenizer, t, n or 0, p_in or 0, p_out or 0,
                           settings.max_prompt_chars)

    def on_convo(t: str, n: float | None, p_in: float | None, p_out: float | None,
                 k: float) -> str:
        return run.conversation_md(lm.tokenizer, t, n or 0, p_in or 0, p_out or 0, k,
                                   settings.max_prompt_chars)

    gr.on([text.change, out_tokens.change, price_in.change, price_out.change],
          guarded(on_cost, compute=False), [text, out_tokens, price_in, price_out], cost,
          trigger_mode="always_last", show_progress="hidden", api_name="token_cost")
    gr.on([text.change, out_tokens.change, price_in.change, price_out.change, turns.release,
           turns.input], guarded(on_convo, compute=False),
          [text, out_tokens, price_in, price_out, turns], convo,
          trigger_mode="always_last", show_progress="hidden", api_name="conversation_cost")
