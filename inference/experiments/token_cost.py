"""Lesson 1: what tokens cost. Hosted APIs price input and output tokens per million.

    cost = input_tokens × input_price / 1e6 + output_tokens × output_price / 1e6
    input tokens at turn k = template(k) + k × question + (k − 1) × answer

A chat resends its whole history every turn, so its input bill grows with the square of turns.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import LIMITS
from ..tokens import encode_text


@dataclass(frozen=True)
class TokenCost:
    input_tokens: int
    output_tokens: int
    input_cost: float
    output_cost: float

    @property
    def total(self) -> float:
        return self.input_cost + self.output_cost


def token_cost(input_tokens: int, output_tokens: int, input_price_per_m: float,
               output_price_per_m: float) -> TokenCost:
    LIMITS.token_price_per_m.check("Input price", input_price_per_m)
    LIMITS.token_price_per_m.check("Output price", output_price_per_m)
    LIMITS.cost_output_tokens.check("Output tokens", output_tokens)
    return TokenCost(input_tokens, output_tokens,
                     input_tokens * input_price_per_m / 1e6,
                     output_tokens * output_price_per_m / 1e6)


@dataclass(frozen=True)
class TurnCost:
    turn: int  # 1-based
    input_tokens: int  # the whole history resent, plus this turn's question
    output_tokens: int
    cost: float  # dollars for this turn's request
    total: float  # dollars for the conversation so far


def templated_turn_inputs(tokenizer, question: str, answer_tokens: int, turns: int) -> list[int]:
    """Input tokens of each turn of a chat asking `question` each time: the model's chat
    template rendered empty, the texts counted apart (exact up to a merge at an edge)."""
    LIMITS.conversation_turns.check("Turns", turns)
    question_tokens = len(encode_text(tokenizer, question))
    out, messages = [], []
    for k in range(1, int(turns) + 1):
        messages = messages + [{"role": "user", "content": ""}]
        markers = tokenizer.apply_chat_template(messages, tokenize=False,
                                                add_generation_prompt=True)
        template = len(tokenizer(markers, add_special_tokens=False)["input_ids"])
        out.append(template + k * question_tokens + (k - 1) * int(answer_tokens))
        messages = messages + [{"role": "assistant", "content": ""}]
    return out


def templated_conversation_costs(tokenizer, question: str, answer_tokens: int, turns: int,
                                 input_price_per_m: float,
                                 output_price_per_m: float) -> list[TurnCost]:
    rows, total = [], 0.0
    for k, sent in enumerate(templated_turn_inputs(tokenizer, question, answer_tokens, turns), 1):
        cost = token_cost(sent, int(answer_tokens), input_price_per_m, output_price_per_m).total
        total += cost
        rows.append(TurnCost(k, sent, int(answer_tokens), cost, total))
    return rows
