"""Lessons 2 and 3: prefill and decode, as our own loop of one forward pass per step.

- `prefill` runs the whole prompt in ONE forward pass: all positions in parallel, their
  keys/values filling a fresh KV cache.
- `decode_step` runs ONE new token, reading the cache for everything before it, and appends
  its own keys/values.
Both return the scores (logits) for the next position only; the tests check our tokens
against Hugging Face's own generation loop.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache

from .timing import stopwatch


@dataclass
class Prefill:
    logits: torch.Tensor  # [B, V] scores for the first output token
    cache: DynamicCache  # keys/values of every prompt position
    seconds: float  # synced wall time of the forward pass


@torch.inference_mode()
def forward(model, input_ids: torch.Tensor, cache: DynamicCache,
            attention_mask: torch.Tensor | None = None,
            position_ids: torch.Tensor | None = None) -> torch.Tensor:
    """input_ids [B, S] -> logits [B, V] for the position after the last one; the cache grows
    by S. `logits_to_keep=1`: the (largest) vocabulary projection for the last position only."""
    out = model(input_ids=input_ids, cache=cache, attention_mask=attention_mask,
                position_ids=position_ids, use_cache=True, logits_to_keep=1)
    return out.logits[:, -1, :]


def prefill(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
            ) -> Prefill:
    """The whole prompt in one parallel forward pass into a fresh cache. input_ids [B, S];
    attention_mask [B, S]: 1 = real token, 0 = left padding."""
    cache, position_ids = DynamicCache(), None
    if attention_mask is not None:  # a left-padded row's first real token is position 0, as alone
        position_ids = (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 1)
    with stopwatch(input_ids.device) as t:
        logits = forward(model, input_ids, cache, attention_mask, position_ids)
    return Prefill(logits=logits, cache=cache, seconds=t[0])


def decode_step(model, token_ids: torch.Tensor, cache: DynamicCache,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """token_ids [B] (each row's newest token) -> logits [B, V]; the cache grows by 1. With
    `attention_mask` [B, S+1] (this token's column included) left-padded rows stay aligned."""
    position_ids = None
    if attention_mask is not None:
        position_ids = (attention_mask.long().sum(-1, keepdim=True) - 1)  # [B, 1]
    return forward(model, token_ids[:, None], cache, attention_mask, position_ids)


@torch.inference_mode()
def recompute_logits(model, ids: list[int], device: torch.device) -> torch.Tensor:
    """No cache: the whole sequence again -> the last position's logits [V] (what every decode
    step would cost without a KV cache)."""
    x = torch.tensor([ids], device=device)
    return model(input_ids=x, use_cache=False, logits_to_keep=1).logits[0, -1, :]
