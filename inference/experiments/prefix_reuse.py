"""Lesson 4: prefix reuse. A shared system prompt has the same keys and values every time (a
position attends only to those before it), so it is prefilled once and per question its cache is
copied: time to first token pays for the question alone, and the outputs match. Left out:
eviction, sharing across processes, paged caches.
"""
from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from ..config import LIMITS
from ..errors import EmptyPromptError, PromptTooLongError
from ..generation import decode_step, forward, prefill
from ..kv_cache import crop_to
from ..timing import stopwatch
from ..tokens import clean_text, prompt_ids


@dataclass(frozen=True)
class PrefixCache:
    ids: tuple[int, ...]
    cache: DynamicCache
    seconds: float  # the one-time prefill, paid before any question arrives


@dataclass(frozen=True)
class PrefixRun:
    question: str
    prompt_tokens: int  # the whole prompt: prefix + question
    reused_tokens: int  # positions taken from the stored cache
    ttft_full: float  # full prefill + first token choice
    ttft_reuse: float  # copy of the prefix cache + prefill of the rest + first token choice
    tokens_full: tuple[int, ...]
    tokens_reuse: tuple[int, ...]
    text: str  # the answer (from the reuse path)

    @property
    def same(self) -> bool:
        return self.tokens_full == self.tokens_reuse

    @property
    def speedup(self) -> float:
        return self.ttft_full / self.ttft_reuse if self.ttft_reuse else 0.0


def shared_prefix_ids(tokenizer, system: str) -> list[int]:
    """Chat-template tokens up to the end of the system turn (what every request shares)."""
    if not system or not clean_text(system).strip():
        raise EmptyPromptError("The system prompt is empty: the demo needs a shared prefix.")
    full = full_prompt_ids(tokenizer, system, "x")
    start = tokenizer.convert_tokens_to_ids("<|im_start|>")
    turns = [i for i, t in enumerate(full) if t == start]  # typed markers are never this id
    return full[: turns[-2]]  # up to the user's turn (the last one opens the answer)


def full_prompt_ids(tokenizer, system: str, question: str) -> list[int]:
    if not question or not clean_text(question).strip():
        raise EmptyPromptError("A question is empty: type at least one question.")
    return prompt_ids(tokenizer, question, system=system)  # the app's limits apply


def prefix_request_tokens(tokenizer, system: str, questions: list[str], new_tokens: int,
                          budget_tokens: int) -> int:
    """Tokens one prefix-reuse request feeds, counted before it runs: every question's whole
    prompt prefilled twice (bounding the reuse path's) and answered twice. Raises
    PromptTooLongError over `budget_tokens` (all questions together)."""
    work = sum(2 * (len(full_prompt_ids(tokenizer, system, q)) + new_tokens) for q in questions)
    if work > budget_tokens:
        raise PromptTooLongError(
            f"These {len(questions)} questions need about {work:,} tokens through the model "
            f"(each prompt prefilled twice and answered twice), over this lesson's budget of "
            f"{budget_tokens:,} tokens per request. Use fewer or shorter questions, or a "
            "shorter system prompt.")
    return work


def prefill_prefix(lm, ids: list[int]) -> PrefixCache:
    result = prefill(lm.model, torch.tensor([ids], device=lm.device))
    return PrefixCache(ids=tuple(ids), cache=result.cache, seconds=result.seconds)


@torch.inference_mode()
def greedy_continue(lm, logits: torch.Tensor, cache: DynamicCache, new_tokens: int) -> list[int]:
    out = [int(logits.argmax())]
    stop = lm.stop_ids
    while len(out) < new_tokens and out[-1] not in stop:
        logits = decode_step(lm.model, torch.tensor([out[-1]], device=lm.device), cache)[0]
        out.append(int(logits.argmax()))
    return out


@torch.inference_mode()
def prefix_runs(lm, prefix: PrefixCache, system: str, questions: list[str],
                new_tokens: int = LIMITS.prefix_new_tokens.default) -> Iterator[PrefixRun]:
    """Per question: TTFT with a full prefill and with the stored prefix, and both outputs."""
    LIMITS.prefix_new_tokens.check("New tokens", new_tokens)
    if not questions:
        raise EmptyPromptError("Type at least one question.")
    for q in questions:
        ids = full_prompt_ids(lm.tokenizer, system, q)
        with stopwatch(lm.device) as full:  # the whole prompt prefilled into a fresh cache
            whole = prefill(lm.model, torch.tensor([ids], device=lm.device))
            whole.logits.argmax()
        # copy the prefix cache, prefill the rest (at least one token: its pass gives the scores)
        reused = min(len(os.path.commonprefix([prefix.ids, tuple(ids)])), len(ids) - 1)
        with stopwatch(lm.device) as reuse:
            cache = copy.deepcopy(prefix.cache)
            crop_to(cache, reused)
            logits = forward(lm.model, torch.tensor([ids[reused:]], device=lm.device), cache)[0]
            logits.argmax()
        tokens_f = greedy_continue(lm, whole.logits[0], whole.cache, new_tokens)
        tokens_r = greedy_continue(lm, logits, cache, new_tokens)
        yield PrefixRun(question=q, prompt_tokens=len(ids), reused_tokens=reused,
                        ttft_full=full[0], ttft_reuse=reuse[0], tokens_full=tuple(tokens_f),
                        tokens_reuse=tuple(tokens_r),
                        text=lm.tokenizer.decode(tokens_r, skip_special_tokens=True))


def prefix_reuse_tokens(tokenizer, system: str, questions: list[str], new_tokens: int) -> int:
    """Tokens the demo feeds: the shared prefix once, then `prefix_request_tokens`."""
    return len(shared_prefix_ids(tokenizer, system)) + prefix_request_tokens(
        tokenizer, system, questions, new_tokens, budget_tokens=2**62)
