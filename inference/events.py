"""The engine's vocabulary: small frozen records that the UI streams, tests check and
benchmarks time. One `StepEvent` per generated token."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    token_id: int
    piece: str  # the token's text, e.g. " world"
    probability: float  # after temperature / top-k / top-p (what the draw used)
    raw_probability: float  # plain softmax of the model's scores (temperature 1)


@dataclass(frozen=True)
class StepEvent:
    """One output token. Step 0 includes the prefill; its `seconds` is the time to first token."""

    index: int  # 0 for the first output token
    token_id: int
    piece: str  # text this token added to the output ("" while a character is incomplete)
    text: str  # the whole output so far
    special: bool  # e.g. the end-of-turn marker
    candidates: tuple[Candidate, ...]  # the top candidates, most likely first
    chosen_by: str  # "greedy", "sampled (T=0.8, top-k=50)", "your pick"
    forward_tokens: int  # tokens this step's forward pass processed (the prompt, then 1)
    forward_seconds: float  # model forward, device synced
    seconds: float  # forward + choosing the token: this token's latency
    cache_tokens: int  # positions held in the KV cache when this token was chosen
    cache_bytes: int  # bytes of the real key/value tensors at that moment
    finished: str | None = None  # "end of turn", "max tokens" on the last step, else None
    batch_rows: int = 1  # requests that shared this forward pass (the server batches visitors)
    # Step 0 on the server: what the first token's time paid for, so a screen says it truly.
    prefix_cached_tokens: int = 0  # prompt tokens read from the prefix cache, not computed
    prefill_passes: int = 1  # forward passes its computed prompt tokens took (chunked prefill)

