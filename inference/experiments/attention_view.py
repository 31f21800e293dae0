"""Lesson 4: the real KV cache. `watch_growth` reads its tensors after every step (the prefill
holds the whole prompt; each later step adds one position to every layer). What it is read for:
the newest token's attention, from the REAL cached keys and its recomputed query, every layer:

    q = rotary(q_proj(input_layernorm(h)))        # h: the newest token entering layer l
    weights = softmax(q · Kᵀ / √head_dim)         # K: layer l's cached keys, all positions

With grouped-query attention, query head h reads KV head h // (query_heads / kv_heads).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from ..errors import EmptyPromptError
from ..generation import next_token, start
from ..kv_cache import CacheSnapshot, snapshot


@dataclass(frozen=True)
class GrowthStep:
    """One output token and the cache right after the step that chose it."""

    index: int
    piece: str
    text: str
    prompt_tokens: int
    seconds: float
    cache: CacheSnapshot
    finished: str | None


def watch_growth(lm, prompt_ids: list[int], max_new_tokens: int = 24,
                 max_new_limit: int = 512) -> Iterator[GrowthStep]:
    """Generate greedily and yield the real cache after every step (step 0: the prefill). The
    cache lags the text by one token: the next pass writes the newest token's keys/values."""
    gen = start(lm, prompt_ids, max_new_tokens=max_new_tokens, max_new_limit=max_new_limit)
    while not gen.finished:
        ev = next_token(lm, gen)
        yield GrowthStep(ev.index, ev.piece, ev.text, len(prompt_ids), ev.seconds,
                         snapshot(gen.cache), ev.finished)


@dataclass(frozen=True)
class AttentionView:
    pieces: tuple[str, ...]  # one text piece per cached position
    # weights[layer][query head][position]: a float32 array [L, H_q, S] (4 bytes a weight, not
    # a Python float's ~32), or nested tuples in tests
    weights: Any
    kv_heads: int
    query_heads: int

    @property
    def nbytes(self) -> int:
        """Bytes the weights hold (what the view costs the server between clicks)."""
        return int(getattr(self.weights, "nbytes", 0))

    @property
    def layers(self) -> int:
        return len(self.weights)

    def kv_head_of(self, query_head: int) -> int:
        return query_head // (self.query_heads // self.kv_heads)


def newest_token_query(model, hidden: torch.Tensor, layer: int, position: int) -> torch.Tensor:
    """hidden [1, hidden_size] (the newest token entering `layer`) -> query [H_q, D], rotated."""
    block = model.model.layers[layer]
    attn = block.self_attn
    x = block.input_layernorm(hidden)[:, None, :]  # [1, 1, hidden]
    q = attn.q_proj(x).view(1, 1, -1, attn.head_dim).transpose(1, 2)  # [1, H_q, 1, D]
    pos = torch.tensor([[position]], device=hidden.device)
    cos, sin = model.model.rotary_emb(x, pos)
    q, _ = apply_rotary_pos_emb(q, q, cos, sin)
    return q[0, :, 0, :]  # [H_q, D]


@torch.inference_mode()
def newest_attention(lm, ids: list[int]) -> AttentionView:
    """Run `ids` once into a cache: the last token's attention in every layer and head."""
    if not ids:
        raise EmptyPromptError("The prompt is empty: type some text first.")
    model = lm.model
    cache = DynamicCache()
    out = model(input_ids=torch.tensor([ids], device=lm.device), cache=cache, use_cache=True,
                output_hidden_states=True, logits_to_keep=1)
    rows = []
    for layer in range(len(model.model.layers)):
        hidden = out.hidden_states[layer][:, -1, :]  # [1, hidden]: input to this layer
        q = newest_token_query(model, hidden, layer, len(ids) - 1)  # [H_q, D]
        keys = cache.layers[layer].keys[0]  # [H_kv, S, D]
        k = keys.repeat_interleave(q.shape[0] // keys.shape[0], dim=0)  # [H_q, S, D]: by group
        scores = torch.einsum("hd,hsd->hs", q.float(), k.float()) / q.shape[1] ** 0.5  # [H_q, S]
        rows.append(torch.softmax(scores, dim=-1).cpu())  # each row sums to 1
    cfg = model.config
    return AttentionView(pieces=tuple(lm.tokenizer.decode([i]) for i in ids),
                         weights=torch.stack(rows).numpy(),  # [L, H_q, S] float32
                         kv_heads=cfg.num_key_value_heads, query_heads=cfg.num_attention_heads)


class HeldAttention:
    """A visitor's view kept between clicks (to redraw another layer or head) under the decode
    caches' budget (`generation.CacheBudget`): freed, `view` is None and the learner reruns."""

    def __init__(self, view: AttentionView) -> None:
        self.view: AttentionView | None = view

    def held_bytes(self) -> int:
        return self.view.nbytes if self.view is not None else 0

    def free_cache(self) -> None:
        self.view = None
