"""Speculative decoding: more than one token per read of the weights, with the same output.

Plain decoding runs one forward pass per token, and at batch 1 that pass mostly waits for the
weights to be read (lesson 3), so one stream cannot beat bandwidth ÷ bytes per token. A pass
that runs k + 1 tokens reads the same weights once and costs little more. So:

1. a cheap **draft** guesses the next k tokens (`drafts.py`: prompt lookup, or a smaller model);
2. ONE **verification pass** runs the newest accepted token plus the k guesses through the model
   over its KV cache, giving the model's own scores at all k + 1 positions;
3. the longest prefix of guesses the model agrees with is kept, plus the model's own next token
   (`acceptance.py`): every pass gains 1 to k + 1 tokens;
4. the cache is cut back past the rejected guesses, as if they had never been run.

Greedy output is exactly plain greedy decoding's (the draft only decides how many tokens are
checked at once); with sampling, the acceptance rule keeps the output distribution the model's
own. Each pass yields one `SpecPass`; index 0 is the prefill, which proposes nothing.

Left out: tree drafts (several guesses per position), and batching several requests'
guesses in one pass (`experiments/speculative_race.py` measures what that costs).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from .acceptance import accept_greedy, accept_sampled
from .config import LIMITS
from .drafts import Draft
from .engine import forward
from .errors import SettingOutOfRangeError
from .generation import check_prompt, finish_reason
from .kv_cache import cache_length, crop_to
from .sampling import SamplingSettings, choose, make_generator, shaped_probabilities
from .timing import stopwatch


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
        """Guesses the model judged: the kept ones and the first rejected one (the guesses
        after a rejection were never judged)."""
        return self.accepted + (1 if self.accepted < len(self.proposed) else 0)


@torch.inference_mode()
def verify_logits(model, token_ids: list[int], cache: DynamicCache, device) -> torch.Tensor:
    """The verification pass: token_ids (the newest accepted token, then the k guesses) through
    the model in ONE forward pass over `cache` -> logits [k + 1, V] for every position.
    The cache grows by k + 1; the caller crops it."""
    x = torch.tensor([token_ids], device=device)  # [1, k + 1]
    out = model(input_ids=x, cache=cache, use_cache=True, logits_to_keep=len(token_ids))
    return out.logits[0]  # [k + 1, V]


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
    """Generate with `draft` proposing up to k tokens per pass; yield one `SpecPass` per pass.

    A guess list longer than the tokens left is cut (a pass never overshoots max_new_tokens);
    an empty one (the draft has nothing to say) makes the pass a plain decode step.
    `cache`: an empty DynamicCache to fill, for a caller that reads it between passes."""
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
    text = tok.decode(out)
    yield SpecPass(0, (), (), 0, first, tok.decode([first]), (first,), len(prompt_ids), 0.0,
                   t[0], t[0], cache_length(cache), 1, text, finished)
    index = 0
    while finished is None:
        index += 1
        with stopwatch(device) as tp:  # the whole pass
            held = cache_length(cache)  # every token but the newest output token
            left = max_new_tokens - len(out)
            with stopwatch(device) as td:
                proposal = draft.propose(prompt_ids + out, min(k, left - 1), sampling, generator)
            guesses = list(proposal.ids[:max(0, min(k, left - 1))])
            with stopwatch(device) as tv:  # no guesses: a plain decode step
                rows = verify_logits(model, [out[-1]] + guesses, cache, device)  # [k + 1, V]
            if sampling.greedy:
                kept, model_token = accept_greedy(rows.argmax(-1).tolist(), guesses)
            else:
                q = None if proposal.probs is None else proposal.probs[:len(guesses)]
                kept, model_token = accept_sampled(shaped_probabilities(rows, sampling), guesses, q,
                                                   generator)
            crop_to(cache, held + 1 + kept)  # the newest token and the kept guesses stay
            new, finished, used = _new_tokens(guesses[:kept], model_token, len(out), lm.stop_ids,
                                              max_new_tokens)
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


def _new_tokens(kept: list[int], model_token: int, made: int, stop_ids: frozenset[int],
                max_new: int) -> tuple[list[int], str | None, bool]:
    """(the tokens a pass adds, why the run ends or None, whether the model's own token is among
    them). An end-of-turn among the kept guesses ends the run there, as plain decoding would."""
    new: list[int] = []
    for token in kept + [model_token]:
        new.append(token)
        reason = finish_reason(token, made + len(new), stop_ids, max_new)
        if reason:
            return new, reason, len(new) > len(kept)
    return new, None, True


def spec_tokens(passes: list[SpecPass]) -> list[int]:
    """The output token ids of a run's passes, in order."""
    return [t for p in passes for t in p.new_ids]
