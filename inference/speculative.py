"""Speculative decoding: more than one token per read of the weights, with the same output.

A batch-1 decode pass mostly waits for the weights (lesson 3); a pass of k + 1 tokens costs
little more. So a cheap **draft** guesses k tokens d1..dk (`Draft`: prompt lookup, what
followed the last few tokens earlier in the text; or this model in int4, or its first N layers),
ONE **verification pass** gives the model's own distribution p_i at all k + 1 positions, the
**acceptance rule** keeps a prefix of the guesses plus one token of the model's own, and the
cache is cut back past the rest.

Greedy keeps guesses while they equal the model's argmax: exactly plain greedy output. Sampled
(Leviathan et al. 2023, Chen et al. 2023) keeps d_i with probability min(1, p_i(d_i) / q_i(d_i)),
q_i the draft's distribution (one-hot for prompt lookup), and at the first rejection draws
from the normalised max(0, p_i - q_i): each token is distributed exactly as p_i, so a bad
draft costs speed, never quality. Left out: tree drafts; several requests' guesses in one pass.

>>> accept_greedy(picks=[5, 7, 9], draft_ids=[5, 8])  # kept 5; 8 rejected, the model says 7
(1, 7)
"""
from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from transformers import DynamicCache

from .config import LIMITS
from .errors import SettingOutOfRangeError
from .generation import check_prompt, finish_reason, forward
from .kv_cache import cache_length, crop_to
from .sampling import SamplingSettings, choose, make_generator, shaped_probabilities
from .timing import stopwatch


@dataclass(frozen=True)
class Proposal:
    ids: tuple[int, ...]  # the guessed next tokens, in order (may be empty)
    probs: torch.Tensor | None = None  # [len(ids), V] the draft's q; None: one-hot or greedy


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


class Draft:
    """Guesses up to k tokens that follow `ids` (the prompt and the output so far). With no
    `model`: prompt lookup, certain guesses (a one-hot q). With one: k decode steps of that
    small model on its own KV cache (holding `self.fed`), first cropped to the part that still
    agrees with `ids`. `key` names it ("prompt_lookup", "int4", "early_exit_8"), `label` says
    what the lesson calls it, `reset()` forgets an earlier generation."""

    def __init__(self, model: nn.Module | None, key: str, label: str) -> None:
        self.model, self.key, self.label = model, key, label
        self.reset()

    def reset(self) -> None:
        self.cache, self.fed = DynamicCache(), []

    @torch.inference_mode()
    def propose(self, ids: list[int], k: int, sampling: SamplingSettings,
                generator: torch.Generator | None) -> Proposal:
        if self.model is None:
            return Proposal(tuple(lookup(ids, k)))
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
    model sharing every weight (no copy)."""
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
        return Draft(None, key, "prompt lookup (n-gram match, no second model)")
    if key == "int4":
        from .quantize import build_mode  # only when an int4 draft is built

        return Draft(build_mode(lm, "int4-g32", shared).model, key,
                     "the same model in int4 (lesson 6's int4-g32 mode)")
    if key.startswith("early_exit_") and key.removeprefix("early_exit_").isdigit():
        n = int(key.removeprefix("early_exit_"))
        return Draft(early_exit_model(lm.model, n), key,
                     f"the model's first {n} of {len(lm.model.model.layers)} layers "
                     "+ its final norm and head (early exit)")
    raise SettingOutOfRangeError(
        f"Unknown draft {key!r}; choose prompt_lookup, int4 or early_exit_N (N layers).")


def accept_greedy(picks: Sequence[int], draft_ids: Sequence[int]) -> tuple[int, int]:
    """picks: the model's argmax at each of the k + 1 positions; draft_ids: the k guesses.
    -> (guesses kept, the model's own token after them)."""
    kept = 0
    while kept < len(draft_ids) and int(picks[kept]) == int(draft_ids[kept]):
        kept += 1
    return kept, int(picks[kept])


def residual(p: torch.Tensor, q: torch.Tensor | None, guess: int) -> torch.Tensor:
    """Normalised max(0, p - q) [V], drawn from after rejecting `guess` (q None: one-hot on
    `guess`); p itself where nothing is left (p <= q everywhere, only by rounding)."""
    if q is None:
        rest = p.clone()
        rest[guess] = 0.0
    else:
        rest = (p - q).clamp(min=0.0)
    total = rest.sum()
    return rest / total if float(total) > 0 else p


def accept_sampled(p: torch.Tensor, draft_ids: Sequence[int], q: torch.Tensor | None,
                   generator: torch.Generator | None) -> tuple[int, int]:
    """p [k + 1, V] the model's (shaped) probabilities, q [k, V] the draft's (None: one-hot)
    -> (guesses kept, the model's token after them). A seeded `generator` repeats exactly."""
    for i, guess in enumerate(int(d) for d in draft_ids):
        q_guess = 1.0 if q is None else float(q[i, guess])
        u = float(torch.rand((), generator=generator, device=p.device))
        if q_guess > 0 and u * q_guess < float(p[i, guess]):  # u < p / q, i.e. min(1, p / q)
            continue
        rest = residual(p[i], None if q is None else q[i], guess)
        return i, int(torch.multinomial(rest, 1, generator=generator))
    k = len(draft_ids)
    return k, int(torch.multinomial(p[k], 1, generator=generator))


@dataclass(frozen=True)
class SpecPass:
    """One verification pass (index 0: the prefill, which proposes nothing)."""

    index: int  # 0 = prefill; then one per verification pass
    proposed: tuple[int, ...]  # the draft's guesses, in order (empty: a plain decode step)
    proposed_pieces: tuple[str, ...]  # the text of each guess
    accepted: int  # guesses kept: the longest prefix the model agreed with
    model_token: int | None  # the model's own token after them; None if a kept guess ended it
    model_piece: str  # its text ("" when None)
    new_ids: tuple[int, ...]  # tokens this pass added to the output (kept guesses + model's)
    forward_tokens: int  # tokens the model's pass ran (the prompt at 0; 1 + guesses after)
    draft_seconds: float  # the draft's proposing, device synced
    verify_seconds: float  # the model's one forward pass, device synced
    seconds: float  # the whole pass: proposing + verifying + accepting + cache crop
    cache_tokens: int  # positions in the model's KV cache after the crop
    tokens_so_far: int  # output tokens after this pass
    text: str  # the whole output so far
    finished: str | None = None  # "end of turn" or "max tokens" on the last pass

    @property
    def gained(self) -> int:
        """Output tokens this pass added (1 to k + 1)."""
        return len(self.new_ids)

    @property
    def judged(self) -> int:
        """Guesses the model judged: the kept ones and the first rejected one."""
        return self.accepted + (1 if self.accepted < len(self.proposed) else 0)


def check_request(lm, prompt_ids: list[int], k: int, max_new_tokens: int) -> None:
    """Refuse, with a learner-facing message, what the lesson's controls would not offer."""
    check_prompt(lm, prompt_ids, max_new_tokens, LIMITS.spec_new_tokens.low,
                 LIMITS.spec_new_tokens.high, "New tokens")
    LIMITS.spec_k.check("Draft length k", k)
    if k != int(k):
        raise SettingOutOfRangeError(f"Draft length k must be a whole number (got {k!r}).")


def speculate(lm, prompt_ids: list[int], draft: Draft, k: int = LIMITS.spec_k.default,
              sampling: SamplingSettings | None = None,
              max_new_tokens: int = LIMITS.spec_new_tokens.default,
              cache: DynamicCache | None = None) -> Iterator[SpecPass]:
    """Generate with `draft` proposing up to k tokens per pass; yield one `SpecPass` per pass
    (never past max_new_tokens; no guesses: a plain decode step). `cache`: an empty
    DynamicCache to fill, for a caller that reads it between passes."""
    check_request(lm, prompt_ids, k, max_new_tokens)
    sampling = sampling or SamplingSettings()
    model, device, tok = lm.model, lm.device, lm.tokenizer
    generator = make_generator(sampling, device)
    draft.reset()
    cache = DynamicCache() if cache is None else cache
    with stopwatch(device) as t:
        logits = forward(model, torch.tensor([prompt_ids], device=device), cache)  # [1, V]
        first = int(choose(logits, sampling, generator)[0][0])
    out = [first]
    finished = finish_reason(first, 1, lm.stop_ids, max_new_tokens)
    yield SpecPass(0, (), (), 0, first, tok.decode([first]), (first,), len(prompt_ids), 0.0,
                   t[0], t[0], cache_length(cache), 1, tok.decode(out), finished)
    index = 0
    while finished is None:
        index += 1
        with stopwatch(device) as tp:  # the whole pass
            held = cache_length(cache)  # every token but the newest output token
            most = min(k, max_new_tokens - len(out) - 1)  # guesses that cannot overshoot
            with stopwatch(device) as td:
                proposal = draft.propose(prompt_ids + out, most, sampling, generator)
            guesses = list(proposal.ids[:most])
            # The newest token and the guesses in ONE pass (no guesses: a plain decode step).
            with stopwatch(device) as tv, torch.inference_mode():
                x = torch.tensor([[out[-1]] + guesses], device=device)  # [1, k + 1]
                rows = model(input_ids=x, cache=cache, use_cache=True,
                             logits_to_keep=x.shape[1]).logits[0]  # [k + 1, V]
            if sampling.greedy:
                kept, model_token = accept_greedy(rows.argmax(-1).tolist(), guesses)
            else:
                q = None if proposal.probs is None else proposal.probs[:len(guesses)]
                kept, model_token = accept_sampled(shaped_probabilities(rows, sampling), guesses, q,
                                                   generator)
            crop_to(cache, held + 1 + kept)  # the newest token and the kept guesses stay
            new = []
            for token in guesses[:kept] + [model_token]:  # an end of turn ends the run there
                new.append(token)
                finished = finish_reason(token, len(out) + len(new), lm.stop_ids, max_new_tokens)
                if finished:
                    break
            used = len(new) > kept  # the model's own token is among them
            out += new
            text = tok.decode(out)
        yield SpecPass(
            index=index, proposed=tuple(guesses),
            proposed_pieces=tuple(tok.decode([g]) for g in guesses),
            accepted=len(new) - used, model_token=model_token if used else None,
            model_piece=tok.decode([model_token]) if used else "", new_ids=tuple(new),
            forward_tokens=1 + len(guesses), draft_seconds=td[0], verify_seconds=tv[0],
            seconds=tp[0], cache_tokens=cache_length(cache),
            tokens_so_far=len(out), text=text, finished=finished)
