"""Lesson 1: what tokens cost. Hosted APIs price input and output tokens per million.

    cost = input_tokens × input_price / 1e6 + output_tokens × output_price / 1e6

Output tokens usually cost more: each one needs its own decode step, while input tokens
share one parallel prefill.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import LIMITS


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
    """Dollars for one request at the given prices per million tokens."""
    LIMITS.token_price_per_m.check("Input price", input_price_per_m)
    LIMITS.token_price_per_m.check("Output price", output_price_per_m)
    LIMITS.cost_output_tokens.check("Output tokens", output_tokens)
    return TokenCost(input_tokens, output_tokens,
                     input_tokens * input_price_per_m / 1e6,
                     output_tokens * output_price_per_m / 1e6)
