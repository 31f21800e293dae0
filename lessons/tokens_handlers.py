"""Lesson 1 handlers: a text's tokens as typed or as the model reads it (chat template), their
counts, and what a request or a conversation would cost at a price per million tokens."""
from __future__ import annotations

from typing import NamedTuple

from inference.config import LIMITS
from inference.errors import PromptTooLongError
from inference.experiments.serving_cost import templated_conversation_costs, token_cost
from inference.tokens import clean_text, tokenize, tokenize_chat
from visualizations import token_view

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
        return TokenView(token_view.token_html(plain.tokens),
                         token_view.token_counts_md(text, len(plain.tokens)),
                         "*Tick the box to see the same text wrapped in the chat template.*")
    wrapped = tokenize_chat(tokenizer, text)
    return TokenView(token_view.token_html(wrapped.tokens),
                     token_view.token_counts_md(wrapped.text, len(wrapped.tokens),
                                                wrapped.special_count),
                     token_view.template_note_md(len(plain.tokens), len(wrapped.tokens),
                                                 wrapped.special_count))


def cost_md(tokenizer, text: str, output_tokens: float, price_in: float, price_out: float,
            max_chars: int = LIMITS.max_prompt_chars) -> str:
    """The cost of one request with this prompt (chat template included)."""
    text = _checked_text(text, max_chars)
    n_in = len(tokenize_chat(tokenizer, text).tokens)
    cost = token_cost(n_in, int(output_tokens), float(price_in), float(price_out))
    return token_view.token_cost_md(cost, price_in, price_out)


def conversation_md(tokenizer, text: str, output_tokens: float, price_in: float,
                    price_out: float, turns: float,
                    max_chars: int = LIMITS.max_prompt_chars) -> str:
    """The multi-turn table: this text as every question, the expected output as every answer."""
    return token_view.conversation_cost_md(templated_conversation_costs(
        tokenizer, _checked_text(text, max_chars), int(output_tokens), int(turns),
        float(price_in), float(price_out)))
