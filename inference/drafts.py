"""Drafts for speculative decoding: cheap guesses of the next k tokens, checked by the model.

A draft only has to be cheap and often right; the model's verification pass decides every
token, so a bad guess costs time, never correctness.

- **Prompt lookup** (`PromptLookup`): propose what followed the last few tokens earlier in the
  prompt + output. No second model, almost free; it shines when the answer repeats its input
  (spelling fixes, code edits, quotes) and proposes nothing when the text is new.
- **A draft model** (`ModelDraft`): a smaller model runs k cheap decode steps with its own KV
  cache, cut back to what was accepted. The bundled package holds one model, so the draft is
  built from it: `early_exit_model` (its first N layers, sharing the weights) or the whole
  model in lesson 6's int4 mode, the default (`Settings.spec_draft`): this model's head cannot
  read an early layer's hidden state, so early exit's guesses are almost never kept. A draft
  model pays only where its step is much cheaper than the model's (a GPU, a larger model).
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
from .kv_cache import crop_to
from .sampling import SamplingSettings, choose


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

    def reset(self) -> None:
        pass

    def propose(self, ids: list[int], k: int, sampling: SamplingSettings,
                generator: torch.Generator | None) -> Proposal:
        return Proposal(tuple(lookup(ids, k)))


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
        same = next((i for i, (a, b) in enumerate(zip(self.fed, ids)) if a != b),
                    min(len(self.fed), len(ids)))
        same = min(same, len(ids) - 1)  # feed at least one token
        crop_to(self.cache, same)  # drop the rejected guesses
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


def make_draft(lm, key: str, shared=None) -> Draft:
    """A fresh draft by key: "prompt_lookup", "int4" (needs `shared`, a SharedResults that keeps
    the built int4 model) or "early_exit_N" (the first N layers)."""
    if key == "prompt_lookup":
        return PromptLookup()
    if key == "int4":
        from .quant_modes import build_mode  # imports quantize: only when an int4 draft is built

        return ModelDraft(build_mode(lm, "int4-g32", shared).model, key,
                          "the same model in int4 (lesson 6's int4-g32 mode)")
    if key.startswith("early_exit_") and key.removeprefix("early_exit_").isdigit():
        n = int(key.removeprefix("early_exit_"))
        return ModelDraft(early_exit_model(lm.model, n), key,
                          f"the model's first {n} of {len(lm.model.model.layers)} layers "
                          "+ its final norm and head (early exit)")
    raise SettingOutOfRangeError(
        f"Unknown draft {key!r}; choose prompt_lookup, int4 or early_exit_N (N layers).")
