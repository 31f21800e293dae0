"""Drafts for speculative decoding: cheap guesses of the next k tokens, checked by the model.

A draft only has to be cheap and often right; the model's verification pass decides every
token, so a bad guess costs time, never correctness.

- **Prompt lookup** (`PromptLookup`): find the last few tokens earlier in the prompt + output
  and propose what followed them there. No second model, almost free. It shines when the answer
  repeats its input ("fix the spelling in ...", code edits, quoting summaries) and proposes
  nothing (a plain decode step) when the text is new.
- **A draft model** (`ModelDraft`): a smaller, faster model runs k cheap decode steps with its
  own KV cache, kept in step with the model's (cut back to what was accepted). The bundled
  package holds one model, so the draft is built from it: `early_exit_model` (its first N
  layers, then the final norm and the head, sharing the model's weights) or `int4_draft_model`
  (the whole model quantized to int4, lesson 6's mode). Which one is the default and why is
  decided by measurements, recorded in `DRAFT_CHOICE` below (int4: early exit's guesses are
  almost never kept).
"""
from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn
from transformers import DynamicCache

from .config import LIMITS
from .engine import forward
from .errors import SettingOutOfRangeError
from .kv_cache import cache_length
from .sampling import SamplingSettings, choose

DRAFT_CHOICE = """Which draft model, measured on this project's 2-core AMD EPYC (float32, k = 4,
48 new tokens, greedy, 2026-12-01; other engineers' jobs shared the 2 cores):
- early exit keeps almost no guess: the head cannot read an early layer's hidden state in this
  model. Next-token agreement with the full model on one prompt: 0% after 8 of 30 layers, 5%
  after 16, 26% after 24, 55% after 29. Raced: 0 of 112 guesses kept at 8 and at 16 layers
  (edit prompt), 3 of 166 (open question); every pass then pays a draft and a check for one
  token: 5.9 s (8 layers) and 7.6 s (16) against plain decoding's 2.1 s.
- int4 (lesson 6's int4-g32) guesses well: 23 of 24 kept on the edit prompt, 34 of 51 on the
  open question. But one int4 draft step cost about what a float32 step costs on this CPU
  (43 ms each), so k draft steps and a check cost more than they save unless nearly every guess
  is kept: the whole edit run took 1.88 s against 2.09 s (1.1x) with the machine nearly idle,
  and under load (1-min load 5-12) the bench measured it slower than plain decoding (0.33x).
  A k sweep (1 thread, 32 tokens, 1-min load 6-7) kept every int4 guess on the edit prompt and
  was still slower at every k: 0.68x (k = 1) to 0.80x (k = 6), 0.95x at k = 8 (within that
  run's noise); open question 0.71x to 0.80x, 58-94% of guesses kept.
So int4 is the draft model kept (`Settings.spec_draft`), and no draft built from this model beat
plain decoding here, let alone by the issue's 1.2x; prompt lookup (no draft cost) did: 0.94 s
against 2.09 s (2.2x) on the idle run, 1.3x (k = 1) to 3.8x (k = 8) in the sweep. On a device
where an int4 step is much cheaper than a full one the balance differs: the lesson shows each
run's own figures, never these."""


@dataclass(frozen=True)
class Proposal:
    ids: tuple[int, ...]  # the guessed next tokens, in order (may be empty)
    probs: torch.Tensor | None = None  # [len(ids), V] the draft's distribution q per guess;
    # None for a deterministic draft (a one-hot q) or a greedy run


class Draft(Protocol):
    key: str  # "prompt_lookup", "int4", "early_exit_8"
    label: str  # what the lesson calls it

    def reset(self) -> None:
        """Forget any state from an earlier generation."""

    def propose(self, ids: list[int], k: int, sampling: SamplingSettings,
                generator: torch.Generator | None) -> Proposal:
        """Up to k guesses of what follows `ids` (the prompt and the output so far)."""


def lookup(ids: Sequence[int], k: int, max_ngram: int = LIMITS.spec_lookup_ngram) -> list[int]:
    """Prompt lookup: the tokens that followed the most recent earlier occurrence of the last
    n tokens (n = max_ngram down to 1), at most k of them; [] when nothing matches.

    >>> lookup([1, 2, 3, 9, 1, 2], k=2)  # "1 2" came before, followed by "3 9"
    [3, 9]
    """
    if k <= 0:
        return []
    ids = list(ids)
    for n in range(min(max_ngram, len(ids) - 1), 0, -1):
        tail = ids[-n:]
        for start in range(len(ids) - n - 1, -1, -1):  # most recent match first
            if ids[start:start + n] == tail:
                return ids[start + n:start + n + k]
    return []


class PromptLookup:
    """The n-gram draft: no model, no state; guesses are certain (a one-hot q)."""

    key = "prompt_lookup"
    label = "prompt lookup (n-gram match, no second model)"

    def __init__(self, max_ngram: int = LIMITS.spec_lookup_ngram) -> None:
        self.max_ngram = max_ngram

    def reset(self) -> None:
        pass

    def propose(self, ids: list[int], k: int, sampling: SamplingSettings,
                generator: torch.Generator | None) -> Proposal:
        return Proposal(tuple(lookup(ids, k, self.max_ngram)))


class ModelDraft:
    """A small model proposing k tokens by k decode steps of its own, with its own KV cache.

    The cache holds `self.fed` (the tokens it has seen); each proposal keeps the part that
    still agrees with the real sequence (the accepted guesses) and crops the rest, then feeds
    what it lacks (the model's replacement token, and the last guess if it was kept)."""

    def __init__(self, model: nn.Module, key: str, label: str) -> None:
        self.model, self.key, self.label = model, key, label
        self.reset()

    def reset(self) -> None:
        self.cache, self.fed = DynamicCache(), []

    @torch.inference_mode()
    def propose(self, ids: list[int], k: int, sampling: SamplingSettings,
                generator: torch.Generator | None) -> Proposal:
        if k <= 0:
            return Proposal(())
        device = next(self.model.parameters()).device
        same = _common_prefix(self.fed, ids, len(ids) - 1)  # feed at least one token
        if cache_length(self.cache) > same:
            self.cache.crop(same - cache_length(self.cache))  # drop the rejected guesses
        self.fed = list(ids[:same])  # what the cache holds now
        pending, guesses, rows = list(ids[same:]), [], []
        for _ in range(k):
            logits = forward(self.model, torch.tensor([pending], device=device), self.cache)
            token, probs = choose(logits, sampling, generator)  # [1], [1, V]
            self.fed += pending
            guesses.append(int(token[0]))
            rows.append(probs[0])
            pending = [guesses[-1]]  # the last guess is fed next time, if it is kept
        q = None if sampling.greedy else torch.stack(rows)  # [k, V]
        return Proposal(tuple(guesses), q)


def _common_prefix(a: Sequence[int], b: Sequence[int], cap: int) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y or n >= cap:
            break
        n += 1
    return n


def early_exit_model(model: nn.Module, layers: int) -> nn.Module:
    """The model's first `layers` decoder layers, then its own final norm and head: a shallower
    model sharing every weight (no copy). It predicts from a hidden state the head was not
    trained to read, so its guesses agree less the fewer layers it keeps."""
    total = len(model.model.layers)
    if not 1 <= layers < total:
        raise SettingOutOfRangeError(
            f"An early-exit draft keeps 1 to {total - 1} of the model's {total} layers "
            f"(got {layers}).")
    inner = copy.copy(model.model)  # shallow: shares weights; own module table and config
    inner._modules = dict(inner._modules)
    inner.layers = nn.ModuleList(list(model.model.layers)[:layers])
    inner.config = copy.copy(model.model.config)
    inner.config.num_hidden_layers = layers
    if getattr(inner.config, "layer_types", None):
        inner.config.layer_types = list(inner.config.layer_types)[:layers]
    outer = copy.copy(model)
    outer._modules = dict(outer._modules)
    outer.model, outer.config = inner, inner.config
    return outer


INT4_MODE = "int4-g32"  # lesson 6's int4 mode (groups of 32 weights share a scale)
DRAFT_KEYS = ("prompt_lookup", "int4", "early_exit_N")  # N: the layers kept, e.g. early_exit_8


def int4_draft_model(lm, shared) -> nn.Module:
    """The whole model in lesson 6's int4 mode (built once per process in `shared`)."""
    from .quant_modes import build_mode

    return build_mode(lm, INT4_MODE, shared).model


def make_draft(lm, key: str, shared=None) -> Draft:
    """A fresh draft by key: "prompt_lookup", "int4" (needs `shared`, a SharedResults that keeps
    the built int4 model) or "early_exit_N" (the first N layers)."""
    if key == "prompt_lookup":
        return PromptLookup()
    if key == "int4":
        return ModelDraft(int4_draft_model(lm, shared), key,
                          "the same model in int4 (lesson 6's int4-g32 mode)")
    if key.startswith("early_exit_") and key.removeprefix("early_exit_").isdigit():
        n = int(key.removeprefix("early_exit_"))
        return ModelDraft(early_exit_model(lm.model, n), key,
                          f"the model's first {n} of {len(lm.model.model.layers)} layers "
                          "+ its final norm and head (early exit)")
    raise SettingOutOfRangeError(
        f"Unknown draft {key!r}; choose prompt_lookup, int4 or early_exit_N (N layers).")
