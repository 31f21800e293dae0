"""Speculative decoding meets batching: what the extra guessed tokens cost at batch B.

A verification pass runs B × (k + 1) tokens where a plain step runs B × 1. At batch 1 the extra
tokens are nearly free; at batch 16 the plain step already reuses each weight 16 times, and
once arithmetic sets the pace the guesses stop being free.
"""
from __future__ import annotations

import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from ..config import LIMITS
from ..engine import decode_step, prefill
from ..errors import EmptyPromptError
from ..kv_cache import cache_length, cache_tensor_bytes
from ..speculative import crop_to
from ..timing import stopwatch
from ..weights import bytes_read_per_token
from .roofline import ComputeRoof, WorkPoint, forward_flops, machine_bandwidth, machine_gflops

REPEATS = 5  # timed rounds per batch size (median), after one warm-up round


@dataclass(frozen=True)
class VerifyCost:
    batch: int  # rows decoded together
    k: int  # guesses per row in the verification pass
    plain_seconds: float  # median plain step: B × 1 tokens (synced)
    verify_seconds: float  # median verification pass: B × (k + 1) tokens (synced)
    plain_bound: str  # "memory", "compute" or "neither" (ComputeRoof.verdict's kind)
    verify_bound: str

    @property
    def cost_ratio(self) -> float:
        """How many plain steps one verification pass costs."""
        return self.verify_seconds / self.plain_seconds

    def derived_speedup(self, tokens_per_pass: float) -> float:
        """Derived, not raced: tokens per pass × plain step ÷ pass (every row assumed to keep
        as many guesses, the draft free)."""
        return tokens_per_pass * self.plain_seconds / self.verify_seconds


@torch.inference_mode()
def verify_cost(lm, prompt_ids: list[int], batch: int, k: int, roof: ComputeRoof,
                repeats: int = REPEATS) -> VerifyCost:
    """Prefill `batch` copies of the prompt, then time a plain step and a verification pass in
    turns (the cache cropped back after each; median of `repeats`)."""
    model, device = lm.model, lm.device
    ids = torch.tensor([prompt_ids] * batch, device=device)  # [B, S]
    first = prefill(model, ids)
    cache, held = first.cache, cache_length(first.cache)
    last = first.logits.argmax(-1)  # [B]
    guesses = torch.randint(0, lm.info.vocab_size, (batch, k), device=device,
                            generator=torch.Generator(device=device).manual_seed(0))
    block = torch.cat([last[:, None], guesses], dim=1)  # [B, k + 1]
    plain, verify = [], []
    for i in range(repeats + 1):  # the first round is warm-up
        with stopwatch(device) as tp:
            decode_step(model, last, cache)
        crop_to(cache, held)
        with stopwatch(device) as tv:
            model(input_ids=block, cache=cache, use_cache=True, logits_to_keep=k + 1)
        crop_to(cache, held)
        if i:
            plain.append(tp[0])
            verify.append(tv[0])
    p, v = statistics.median(plain), statistics.median(verify)
    read = bytes_read_per_token(model) + cache_tensor_bytes(cache)
    info = lm.info
    pp = WorkPoint(f"plain step, batch {batch}", forward_flops(info, batch, held), read, p)
    vp = WorkPoint(f"verification, batch {batch}", forward_flops(info, batch * (k + 1), held),
                   read, v)
    return VerifyCost(batch, k, p, v, roof.verdict(pp).kind, roof.verdict(vp).kind)


@dataclass(frozen=True)
class BatchUpdate:
    costs: tuple[VerifyCost, ...]
    message: str
    finished: bool = False


def batch_interplay(lm, prompt_ids: list[int], k: int = LIMITS.spec_k.default,
                    batches: Sequence[int] = LIMITS.spec_batches, repeats: int = REPEATS,
                    shared=None) -> Iterator[BatchUpdate]:
    if not prompt_ids:
        raise EmptyPromptError("The measurement needs a non-empty prompt.")
    LIMITS.spec_k.check("Draft length k", k)
    for b in batches:
        LIMITS.batch.check("Batch size", b)
    roof = ComputeRoof(machine_gflops(shared, lm.device, lm.dtype),
                       machine_bandwidth(shared, lm.device), ())
    costs: list[VerifyCost] = []
    for b in batches:
        yield BatchUpdate(tuple(costs), f"Batch {b}: plain step vs a pass of {b} × {k + 1} "
                          "tokens…")
        costs.append(verify_cost(lm, prompt_ids, b, k, roof, repeats))
    yield BatchUpdate(tuple(costs), f"Done: {len(costs)} batch sizes.", finished=True)


def spec_batch_tokens(prompt: int, k: int, batches: Sequence[int],
                      repeats: int = REPEATS) -> int:
    """Tokens `batch_interplay` feeds: per batch b, the prompt b times, then `repeats` + 1
    rounds of a plain step and a pass of k + 1 tokens, b times."""
    return sum(b * (prompt + (repeats + 1) * (k + 2)) for b in batches)
