"""Lesson 5: will this batch fit in memory? Decide BEFORE running it.

    weights      read-only, paid once however many requests share them
    KV cache     2 × layers × kv_heads × head_dim × bytes × tokens × batch
    activations  bytes × batch × [tokens × (4 × hidden + 3 × intermediate) + heads × tokens²
                 + vocab]   (the batched prefill's transient tensors: an estimate)
"""
from __future__ import annotations

from dataclasses import dataclass

import psutil
import torch

from ..errors import SettingOutOfRangeError
from ..kv_cache import kv_cache_bytes


@dataclass(frozen=True)
class MemoryShape:
    weight_bytes: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    bytes_per_value: int  # 4 for float32, 2 for float16


def model_shape(lm) -> MemoryShape:
    info = lm.info
    inter = int(getattr(lm.model.config, "intermediate_size", 4 * info.hidden_size))
    return MemoryShape(info.weight_bytes, info.layers, info.heads, info.kv_heads, info.head_dim,
                       info.hidden_size, inter, info.vocab_size, lm.bytes_per_value)


@dataclass(frozen=True)
class BatchMemoryPlan:
    batch: int
    tokens_per_row: int  # prompt + generated positions held per request
    weight_bytes: int
    kv_bytes: int
    activation_bytes: int  # estimate
    budget_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.kv_bytes + self.activation_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.budget_bytes


def memory_budget_bytes(device: torch.device | str = "cpu", fraction: float = 0.5) -> int:
    """`fraction` of the memory free right now on `device` (RAM for a CPU)."""
    if not 0 < fraction <= 1:
        raise SettingOutOfRangeError(f"Memory fraction must be in (0, 1] (got {fraction!r}).")
    dev = torch.device(device)
    if dev.type == "cuda":
        free, _total = torch.cuda.mem_get_info(dev)
    else:
        free = psutil.virtual_memory().available
    return int(free * fraction)


def activation_bytes(shape: MemoryShape, batch: int, prompt_tokens: int) -> int:
    per_row = (prompt_tokens * (4 * shape.hidden_size + 3 * shape.intermediate_size)
               + shape.heads * prompt_tokens ** 2 + shape.vocab_size)
    return shape.bytes_per_value * batch * per_row


def plan_batch(shape: MemoryShape, batch: int, prompt_tokens: int, new_tokens: int,
               budget_bytes: int) -> BatchMemoryPlan:
    tokens = prompt_tokens + new_tokens
    kv = kv_cache_bytes(shape.layers, shape.kv_heads, shape.head_dim, shape.bytes_per_value,
                        tokens, batch)
    return BatchMemoryPlan(batch, tokens, shape.weight_bytes, kv,
                           activation_bytes(shape, batch, prompt_tokens), budget_bytes)


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB"


def check_batch_fits(plan: BatchMemoryPlan) -> None:
    if plan.fits:
        return
    raise SettingOutOfRangeError(
        f"Batch {plan.batch} would need about {_mb(plan.total_bytes)} (weights "
        f"{_mb(plan.weight_bytes)} + KV cache {_mb(plan.kv_bytes)} for {plan.tokens_per_row} "
        f"tokens per request + activations ~{_mb(plan.activation_bytes)}, estimated), but the "
        f"memory budget is {_mb(plan.budget_bytes)}. Choose a smaller batch, fewer tokens, "
        f"or a larger budget.")


def largest_fitting_batch(shape: MemoryShape, sizes: list[int], prompt_tokens: int,
                          new_tokens: int, budget_bytes: int) -> int:
    """The largest of `sizes` that fits; raises (with batch 1's arithmetic) if none does."""
    fitting = [b for b in sizes
               if plan_batch(shape, b, prompt_tokens, new_tokens, budget_bytes).fits]
    if not fitting:
        check_batch_fits(plan_batch(shape, min(sizes), prompt_tokens, new_tokens, budget_bytes))
    return max(fitting)
