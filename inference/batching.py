"""Lesson 5 (engine side): several prompts decoded together, one forward pass per step.

Prompts of different lengths are LEFT-padded to the same length, so every row's newest
token sits in the last column. The attention mask (1 = real, 0 = padding) keeps padding
out of attention, and position ids count only real tokens, so each row computes what it
would compute alone. Padded positions still cost work: `padding_waste()` counts them.
"""
from __future__ import annotations

from collections.abc import Iterator

import torch

from .config import LIMITS
from .engine import decode_step, prefill
from .errors import SettingOutOfRangeError
from .events import BatchStep
from .kv_cache import cache_length, cache_tensor_bytes
from .sampling import SamplingSettings, choose, make_generator
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


def batch_generate(lm, prompts: list[list[int]], max_new_tokens: int,
                   sampling: SamplingSettings | None = None, stop_at_eos: bool = True,
                   max_batch: int = LIMITS.batch.high) -> Iterator[BatchStep]:
    """Static batching: prefill all prompts together, then decode all rows in lock-step.

    Yields one `BatchStep` per step (step 0 is the prefill). Finished rows keep their slot
    and are fed padding until the longest row ends: the waste continuous batching removes."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise SettingOutOfRangeError("Every request in a batch needs a non-empty prompt.")
    LIMITS.batch.check("Batch size", len(prompts))
    if len(prompts) > max_batch:
        raise SettingOutOfRangeError(f"Batch size must be at most {max_batch}.")
    LIMITS.new_tokens.check("Max new tokens", max_new_tokens)
    sampling = sampling or SamplingSettings()
    device, tok = lm.device, lm.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    stop_ids = lm.stop_ids
    generator = make_generator(sampling, device)
    ids, mask = left_pad(prompts, pad, device)  # [B, S], [B, S]
    done = torch.zeros(len(prompts), dtype=torch.bool, device=device)

    with stopwatch(device) as t:
        first = prefill(lm.model, ids, mask)
        token, _ = choose(first.logits, sampling, generator)  # [B]
    cache = first.cache
    for step in range(max_new_tokens):
        if step > 0:
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)  # [B, S+step]
            with stopwatch(device) as t:
                logits = decode_step(lm.model, token, cache, mask)  # [B, V]
                token, _ = choose(logits, sampling, generator)
        token = torch.where(done, torch.full_like(token, pad), token)
        out = tuple(-1 if d else int(x) for x, d in zip(token.tolist(), done.tolist()))
        active = int((~done).sum())
        if stop_at_eos:
            done = done | torch.tensor([x in stop_ids for x in token.tolist()], device=device)
        yield BatchStep(index=step, token_ids=out, active=active,
                        forward_tokens=ids.numel() if step == 0 else len(prompts),
                        seconds=t[0], cache_tokens=cache_length(cache),
                        cache_bytes=cache_tensor_bytes(cache))
        if bool(done.all()):
            return


def batch_tokens(steps: list[BatchStep], rows: int) -> list[list[int]]:
    """Collect each row's generated tokens from a list of batch steps."""
    return [[s.token_ids[r] for s in steps if s.token_ids[r] >= 0] for r in range(rows)]
