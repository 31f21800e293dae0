"""The eager decode loop against one step captured and replayed, on the same prompt.

The engine's loop (a growing `DynamicCache`, one Python call per layer per step) against the
static-cache step of `inference.captured_decode`, recorded once as a CUDA graph and replayed
with one launch per token. Both are greedy, so their tokens must be identical: a faster path
that changed the answer would not count. On a CPU there is nothing to capture; the race then
runs the static-cache step eagerly, which shows what the static cache alone does here.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..captured_decode import captured_greedy
from .quality import greedy_run

WARM_UP_TOKENS = 8  # each path's untimed warm-up run (first calls pay for allocation)


@dataclass(frozen=True)
class CapturedRace:
    new_tokens: int  # tokens each side decoded after the same prompt
    captured: bool  # True: the second side replayed a CUDA graph; False: static cache, eager
    eager_tokens_per_s: float  # the engine's loop (DynamicCache), batch 1
    static_tokens_per_s: float  # the static-cache step, run eagerly
    captured_tokens_per_s: float  # the captured step (equals the eager static run on a CPU)
    capture_seconds: float  # one-off: warm-up steps and recording the graph (0 on a CPU)
    same_tokens: bool  # the captured side chose every token the engine chose
    first_difference_at: int | None  # index of the first differing token, if any

    @property
    def speedup(self) -> float:
        """Captured tokens/s ÷ eager tokens/s."""
        return self.captured_tokens_per_s / self.eager_tokens_per_s


def captured_race(lm, ids: list[int], new_tokens: int = 128) -> CapturedRace:
    """Warm both paths up, then decode `new_tokens` greedy tokens each way (batch 1)."""
    greedy_run(lm.model, ids, WARM_UP_TOKENS, lm.device)  # warm-up
    captured_greedy(lm.model, ids, WARM_UP_TOKENS, capture=False)
    eager = greedy_run(lm.model, ids, new_tokens, lm.device)
    static = captured_greedy(lm.model, ids, new_tokens, capture=False)
    on_gpu = lm.device.type == "cuda"
    graph = captured_greedy(lm.model, ids, new_tokens, capture=True) if on_gpu else static
    diff = next((i for i, (a, b) in enumerate(zip(eager.token_ids, graph.token_ids)) if a != b),
                None)
    return CapturedRace(new_tokens, graph.captured, eager.decode_tokens_per_s,
                        static.decode_tokens_per_s, graph.decode_tokens_per_s,
                        graph.capture_seconds, graph.token_ids == eager.token_ids, diff)
