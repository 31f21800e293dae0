"""Lessons 2 and 3: prefill and decode, as our own loop of one forward pass per step.

`prefill` runs the whole prompt in ONE forward pass: all positions in parallel, their keys and
values filling a fresh KV cache. `decode_step` runs ONE new token, reading the cache for
everything before it. Both return the scores (logits) for the next position only.

A `Generation` is one request token by token, the state a learner steps through in Lesson 3:
`next_token()` feeds what the cache lacks (the prompt at first: the prefill, TTFT; then one
token: a decode step, TPOT) and chooses the next token; `branch()` rewinds to an earlier step
to continue with a token the learner picked. `CacheBudget` frees the caches held between clicks.
"""
from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache

from .compute_thread import trim_heap
from .config import LIMITS
from .errors import (
    EmptyPromptError,
    GenerationFinishedError,
    NotReadyError,
    PromptTooLongError,
    SettingOutOfRangeError,
    check_range,
)
from .events import Candidate, StepEvent
from .kv_cache import cache_tensor_bytes, crop_to
from .sampling import SamplingSettings, choose, make_generator, shaped_probabilities
from .timing import stopwatch


@dataclass
class Prefill:
    logits: torch.Tensor  # [B, V] scores for the first output token
    cache: DynamicCache  # keys/values of every prompt position
    seconds: float  # synced wall time of the forward pass


@torch.inference_mode()
def forward(model, input_ids: torch.Tensor, cache: DynamicCache,
            attention_mask: torch.Tensor | None = None,
            position_ids: torch.Tensor | None = None) -> torch.Tensor:
    """input_ids [B, S] -> logits [B, V] for the position after the last one; the cache grows
    by S. `logits_to_keep=1`: the (largest) vocabulary projection for the last position only."""
    out = model(input_ids=input_ids, cache=cache, attention_mask=attention_mask,
                position_ids=position_ids, use_cache=True, logits_to_keep=1)
    return out.logits[:, -1, :]


def prefill(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
            ) -> Prefill:
    """The whole prompt in one parallel forward pass into a fresh cache. input_ids [B, S];
    attention_mask [B, S]: 1 = real token, 0 = left padding."""
    cache, position_ids = DynamicCache(), None
    if attention_mask is not None:  # a left-padded row's first real token is position 0, as alone
        position_ids = (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 1)
    with stopwatch(input_ids.device) as t:
        logits = forward(model, input_ids, cache, attention_mask, position_ids)
    return Prefill(logits=logits, cache=cache, seconds=t[0])


def decode_step(model, token_ids: torch.Tensor, cache: DynamicCache,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """token_ids [B] (each row's newest token) -> logits [B, V]; the cache grows by 1. With
    `attention_mask` [B, S+1] (this token's column included) left-padded rows stay aligned."""
    position_ids = None
    if attention_mask is not None:
        position_ids = (attention_mask.long().sum(-1, keepdim=True) - 1)  # [B, 1]
    return forward(model, token_ids[:, None], cache, attention_mask, position_ids)


@torch.inference_mode()
def recompute_logits(model, ids: list[int], device: torch.device) -> torch.Tensor:
    """No cache: the whole sequence again -> the last position's logits [V] (what every decode
    step would cost without a KV cache)."""
    x = torch.tensor([ids], device=device)
    return model(input_ids=x, use_cache=False, logits_to_keep=1).logits[0, -1, :]


@dataclass
class Generation:
    prompt_ids: list[int]
    sampling: SamplingSettings
    max_new_tokens: int
    stop_ids: frozenset[int]
    top_k_shown: int = 10
    generated: list[int] = field(default_factory=list)
    events: list[StepEvent] = field(default_factory=list)
    cache: DynamicCache | None = None
    fed: int = 0  # tokens of prompt + generated already in the cache
    generator: torch.Generator | None = None
    last_logits: torch.Tensor | None = None  # [V] scores behind the newest event's choice
    pending_force: int | None = None  # set by branch(): the learner's pick for the next step
    stopped: bool = False
    # One visitor's clicks arrive as separate events: steps on one generation take turns, and
    # Stop waits for the step in flight (re-entrant: a view drawn under it may step inside).
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)
    cache_freed: bool = False  # the budget freed the cache; the next step rebuilds it

    @property
    def tokens(self) -> list[int]:
        return self.prompt_ids + self.generated

    @property
    def finished(self) -> str | None:
        if self.stopped:
            return "stopped by you"
        return self.events[-1].finished if self.events else None

    def stop(self, keep: int | None = None) -> None:
        """Stop for good; with `keep`, only the first `keep` tokens stay (those on screen)."""
        self.stopped = True
        if keep is not None:
            self.truncate(keep)

    def truncate(self, keep: int) -> None:
        """Forget every token after the first `keep` (`branch()` crops the cache)."""
        del self.events[max(0, int(keep)):], self.generated[max(0, int(keep)):]

    def held_bytes(self) -> int:
        return cache_tensor_bytes(self.cache)

    def free_cache(self) -> None:
        """Drop the KV cache but keep every token: the next step feeds them all again."""
        if self.cache is not None:
            self.cache, self.fed, self.last_logits = None, 0, None
            self.cache_freed = True

    def set_max_new_tokens(self, max_new_tokens: int, limit: int = LIMITS.new_tokens.high) -> None:
        """Change the length limit mid-run; never below the tokens already made plus one."""
        self.max_new_tokens = max(len(self.generated) + 1, min(int(max_new_tokens), limit))

    def branch(self, step: int, token_id: int) -> None:
        """Rewind to before output token `step` and make `token_id` the next pick. The cache is
        cropped to all but the last token before it, which is fed again for its scores."""
        if not self.events:
            raise NotReadyError("Generate a few tokens first, then branch from one of them.")
        if not 0 <= step <= len(self.generated):
            raise SettingOutOfRangeError(f"There is no step {step} to branch from.")
        self.truncate(step)
        keep = len(self.tokens) - 1
        crop_to(self.cache, keep)
        self.fed = min(self.fed, keep)
        self.pending_force = int(token_id)
        self.stopped = False


def start(lm, prompt_ids: list[int], sampling: SamplingSettings | None = None,
          max_new_tokens: int = LIMITS.new_tokens.default, top_k_shown: int = LIMITS.top_k_shown,
          max_new_limit: int = LIMITS.new_tokens.high) -> Generation:
    """Check the request and set up its state. Nothing runs on the model yet."""
    sampling = sampling or SamplingSettings()
    check_prompt(lm, prompt_ids, max_new_tokens, LIMITS.new_tokens.low, max_new_limit)
    return Generation(prompt_ids=list(prompt_ids), sampling=sampling,
                      max_new_tokens=max_new_tokens, stop_ids=lm.stop_ids, top_k_shown=top_k_shown,
                      generator=make_generator(sampling, lm.device))


def check_prompt(lm, prompt_ids: list[int], max_new_tokens: int, low: int, high: int,
                 name: str = "Max new tokens") -> None:
    """Refuse an empty prompt, a `max_new_tokens` not a whole number in low..high, or a request
    past the context window."""
    if not prompt_ids:
        raise EmptyPromptError("The prompt is empty: type some text first.")
    if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool):
        raise SettingOutOfRangeError(f"{name} must be a whole number (got {max_new_tokens!r}).")
    check_range(name, max_new_tokens, low, high)
    window = lm.info.context_window
    if len(prompt_ids) + max_new_tokens > window:
        raise PromptTooLongError(
            f"The prompt ({len(prompt_ids):,} tokens) plus {max_new_tokens} new tokens exceeds "
            f"the model's context window of {window:,} tokens.")


def next_token(lm, gen: Generation) -> StepEvent:
    """Feed what the cache lacks, choose one token (the learner's pick after `branch()`),
    return its event."""
    if gen.finished:
        raise GenerationFinishedError(
            f"This generation has finished ({gen.finished}); start a new one.")
    force_token, gen.pending_force = gen.pending_force, None
    with stopwatch(lm.device) as fwd:
        pending = gen.tokens[gen.fed:]  # [prompt] at step 0, [last token] afterwards
        gen.cache_freed = False  # (all tokens again after the budget freed the cache)
        if gen.cache is None:
            gen.cache = DynamicCache()
        logits = forward(lm.model, torch.tensor([pending], device=lm.device), gen.cache)[0]
        gen.fed += len(pending)
        gen.last_logits = logits  # [V]
    with stopwatch(lm.device) as pick:
        if force_token is None:
            token, probs = choose(logits[None], gen.sampling, gen.generator)
            token, probs, how = int(token[0]), probs[0], gen.sampling.describe()
        else:
            probs = shaped_probabilities(logits, gen.sampling)
            token, how = int(force_token), "your pick"
        candidates = top_candidates(lm.tokenizer, logits, probs, gen.top_k_shown)

    before = gen.events[-1].text if gen.events else ""  # events and tokens stay in step
    gen.generated.append(token)
    text, piece = output_text(lm.tokenizer, gen.generated, before)
    finished = finish_reason(token, len(gen.generated), gen.stop_ids, gen.max_new_tokens)
    event = StepEvent(
        index=len(gen.generated) - 1, token_id=token, piece=piece, text=text,
        special=token in lm.tokenizer.all_special_ids, candidates=candidates, chosen_by=how,
        forward_tokens=len(pending), forward_seconds=fwd[0], seconds=fwd[0] + pick[0],
        cache_tokens=gen.fed, cache_bytes=cache_tensor_bytes(gen.cache), finished=finished)
    gen.events.append(event)
    return event


def output_text(tokenizer, generated: list[int], before: str) -> tuple[str, str]:
    """(the whole output, the newest token's piece); the piece is "" while a multi-byte
    character is still incomplete."""
    text = tokenizer.decode(generated)
    piece = text[len(before):] if text.startswith(before) else text
    return text, ("" if text.endswith("\ufffd") else piece)


def finish_reason(token: int, made: int, stop_ids: frozenset[int], max_new: int) -> str | None:
    """Why a generation ends after this token: "end of turn", "max tokens", or None."""
    return "end of turn" if token in stop_ids else "max tokens" if made >= max_new else None


def top_candidates(tokenizer, logits: torch.Tensor, probs: torch.Tensor | None, k: int
                   ) -> tuple[Candidate, ...]:
    """The k likeliest tokens under the plain softmax of `logits` [V], with `probs` [V]."""
    if not k:
        return ()
    top = torch.topk(torch.softmax(logits.float(), -1), k)
    return tuple(Candidate(token_id=int(i), piece=tokenizer.decode([int(i)]),
                           probability=float(probs[i]), raw_probability=float(p))
                 for p, i in zip(top.values.tolist(), top.indices.tolist()))


def reshaped(gen: Generation, sampling: SamplingSettings) -> list[float] | None:
    """The newest step's candidates' probabilities under other sampling settings (None: greedy)."""
    if gen.last_logits is None or not gen.events or sampling.greedy:
        return None
    probs = shaped_probabilities(gen.last_logits, sampling)
    return [float(probs[c.token_id]) for c in gen.events[-1].candidates]


def set_sampling(lm, gen: Generation, sampling: SamplingSettings) -> None:
    """Use new sampling settings from the next step on (a fresh seeded generator)."""
    gen.sampling = sampling
    gen.generator = make_generator(sampling, lm.device)


def stream(lm, prompt_ids: list[int], sampling: SamplingSettings | None = None,
           max_new_tokens: int = LIMITS.new_tokens.default) -> Iterator[StepEvent]:
    """Yield each token as it is chosen, until end of turn or max tokens."""
    gen = start(lm, prompt_ids, sampling, max_new_tokens)
    while not gen.finished:
        yield next_token(lm, gen)


class CacheBudget:
    """A memory budget for the KV caches visitors keep between clicks (a Generation's, lesson
    4's attention views): frees them, oldest use first, once idle longer than `idle_s` or while
    all together exceed `cap_bytes` (never the one just used)."""

    def __init__(self, cap_bytes: int, idle_s: float) -> None:
        self.cap_bytes, self.idle_s = cap_bytes, idle_s
        self._lock = threading.Lock()
        self._held: dict[int, tuple[weakref.ref, float]] = {}  # id -> (generation, last use)

    def touch(self, gen: Generation) -> None:
        """`gen` was just used: remember it and free others' caches if over the budget."""
        now, freed = time.monotonic(), 0
        with self._lock:
            self._held[id(gen)] = (weakref.ref(gen), now)
            by_age = sorted(self._alive().items(), key=lambda kv: kv[1][1])  # oldest use first
            total = sum(held.held_bytes() for _, (held, _) in by_age)
            for key, (held, used) in by_age:
                if held is not gen and (total > self.cap_bytes or now - used > self.idle_s):
                    total -= held.held_bytes()
                    held.free_cache()
                    del self._held[key]
                    freed += 1
        events = getattr(gen, "events", None)
        if freed or (events and events[-1].forward_tokens > 256):
            trim_heap()  # after freeing caches, or after a long prefill's scratch memory

    def forget(self, gen: Generation | None) -> None:
        """The visitor is gone (tab closed, state expired): free the cache now."""
        if gen is None:
            return
        with self._lock:
            self._held.pop(id(gen), None)
        gen.free_cache()
        trim_heap()

    def held_bytes(self) -> int:
        with self._lock:
            return sum(gen.held_bytes() for gen, _ in self._alive().values())

    def _alive(self) -> dict[int, tuple[Generation, float]]:
        """The held caches whose owner still exists (-> id: (it, last use)); the rest forgotten."""
        alive = {}
        for key, (ref, used) in list(self._held.items()):
            if (gen := ref()) is None:
                del self._held[key]
            else:
                alive[key] = (gen, used)
        return alive
