"""Lesson 5 (engine side): a decode batch whose rows can join and leave between steps.

Prompts are LEFT-padded to one length (`left_pad`), so every row's newest token sits in the last
column of `[B, H_kv, S, D]`; the mask keeps padding out of attention and position ids count
real tokens only, so each row computes what it would alone, though padding still costs work
(`padding_waste`). The scheduler experiment teaches this layout (`experiments/schedulers.py`,
greedy only); the serving engine keeps its cache in pages instead (`paged_batch.py`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from .engine import decode_step, prefill
from .kv_cache import cache_layers, cache_length
from .timing import stopwatch


def left_pad(prompts: list[list[int]], pad_id: int, device: torch.device | str = "cpu"
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Token lists -> (input_ids [B, S], attention_mask [B, S]), padding on the left."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, p in enumerate(prompts):
        ids[row, width - len(p):] = torch.tensor(p, dtype=torch.long)
        mask[row, width - len(p):] = 1
    return ids.to(device), mask.to(device)


def padding_waste(prompts: list[list[int]]) -> tuple[int, int]:
    """(padded positions, total positions) when these prompts share one prefill."""
    width = max(len(p) for p in prompts)
    total = width * len(prompts)
    return total - sum(len(p) for p in prompts), total


@dataclass
class RowBatch:
    """Rows decoding together. `rows[i]` names the request in row i (a request id)."""

    rows: list[int]
    cache: DynamicCache  # keys/values: [B, H_kv, S, D], left-padded
    mask: torch.Tensor  # [B, S] 1 = real position, 0 = padding
    next_token: torch.Tensor  # [B] the token each row feeds at its next decode step

    @property
    def size(self) -> int:
        return len(self.rows)

    @property
    def width(self) -> int:
        """Positions held per row, padding included (the cache's sequence axis)."""
        return cache_length(self.cache)

    @staticmethod
    def prefill(lm, rows: list[int], prompts: list[list[int]]) -> tuple[RowBatch, float]:
        """Prompts -> (a batch of their caches and greedy first tokens, seconds): one pass."""
        pad = lm.tokenizer.pad_token_id
        pad = lm.tokenizer.eos_token_id if pad is None else pad
        with stopwatch(lm.device) as t:
            ids, mask = left_pad(prompts, pad, lm.device)  # [B, S], [B, S]
            first = prefill(lm.model, ids, mask)
            batch = RowBatch(list(rows), first.cache, mask, first.logits.argmax(-1))
        return batch, t[0]

    def decode(self, lm) -> tuple[list[int], float]:
        """One greedy step for every row -> (each row's new token, synced seconds)."""
        with stopwatch(lm.device) as t:
            self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
            logits = decode_step(lm.model, self.next_token, self.cache, self.mask)  # [B, V]
            self.next_token = logits.argmax(-1)  # [B]
        return self.next_token.tolist(), t[0]

    @torch.inference_mode()
    def join(self, other: RowBatch) -> RowBatch:
        """Both batches' rows in one: the shorter cache padded on the left, rows stacked."""
        width = max(self.width, other.width)
        layers = []
        for (ka, va), (kb, vb) in zip(cache_layers(self.cache), cache_layers(other.cache)):
            layers.append((torch.cat([_pad_left(ka, width, -2), _pad_left(kb, width, -2)]),
                           torch.cat([_pad_left(va, width, -2), _pad_left(vb, width, -2)])))
        mask = torch.cat([_pad_left(self.mask, width, -1), _pad_left(other.mask, width, -1)])
        token = torch.cat([self.next_token, other.next_token])
        return RowBatch(self.rows + other.rows, DynamicCache(ddp_cache_data=layers), mask, token)

    @torch.inference_mode()
    def keep(self, keep_rows: list[int]) -> RowBatch:
        """Only the rows at these indices, and without columns that are padding in all of them."""
        index = torch.tensor(keep_rows, dtype=torch.long, device=self.mask.device)
        mask = self.mask.index_select(0, index)  # [B', S]
        real_cols = mask.any(dim=0).nonzero()
        start = int(real_cols[0]) if len(real_cols) else mask.shape[1]
        layers = [(k.index_select(0, index)[:, :, start:, :],
                   v.index_select(0, index)[:, :, start:, :]) for k, v in cache_layers(self.cache)]
        return RowBatch([self.rows[i] for i in keep_rows], DynamicCache(ddp_cache_data=layers),
                        mask[:, start:], self.next_token.index_select(0, index))


def _pad_left(x: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    """Zeros on the left of axis `dim` (-2: keys/values [B, H, S, D]; -1: a mask [B, S])."""
    return F.pad(x, (0, 0) * (-1 - dim) + (width - x.shape[dim], 0))
