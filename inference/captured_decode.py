"""Decode without the launch overhead: a static KV cache and one step captured as a CUDA graph.

On a GPU one eager decode step of this model launches ~2,400 small kernels from Python, and the
GPU finishes each long before the next arrives (H200: 18.8 ms a step, GPU busy 4.3 ms of it).
A CUDA graph records the whole step once and replays it with one launch. That needs a *static*
cache (`StaticCache`: allocated once, written in place, its length a device tensor the step
advances) and a static input: the newest token lives in one [1, 1] tensor the step reads and
overwrites with its greedy choice. Then n tokens are n replays; outputs are copied out of the
graph's buffers. On a CPU the same step runs eagerly (`capture=False`), which is how the tests
check it gives the engine's tokens. Left out: sampling, batches, stop tokens.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import StaticCache

from .timing import stopwatch

WARM_UP_STEPS = 2  # eager steps on a side stream before capture (CUDA's allocator warms up)


@dataclass(frozen=True)
class CapturedRun:
    token_ids: tuple[int, ...]  # the prompt's first greedy token, then one per decode step
    captured: bool  # True: the decode steps were CUDA-graph replays; False: eager steps
    prefill_seconds: float  # the prompt, eager, into the static cache
    capture_seconds: float  # warm-up steps + recording the graph (one-off; 0 when eager)
    decode_seconds: float  # the steps after capture, synced
    decode_steps: int  # how many steps `decode_seconds` covers

    @property
    def decode_tokens_per_s(self) -> float:
        return self.decode_steps / self.decode_seconds if self.decode_seconds > 0 else 0.0


class StaticDecoder:
    """One sequence's static cache and its one-token greedy step (captured on CUDA)."""

    def __init__(self, model, max_len: int) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        self.cache = StaticCache(config=model.config, max_cache_len=max_len)
        self.token = torch.zeros((1, 1), dtype=torch.long, device=self.device)  # [1, 1]
        self.graph: torch.cuda.CUDAGraph | None = None

    @torch.inference_mode()
    def prefill(self, prompt_ids: list[int]) -> int:
        """The whole prompt in one eager pass; the first greedy token goes into `token`."""
        self._step(torch.tensor([prompt_ids], device=self.device))  # [1, P]
        return int(self.token)

    def _step(self, ids: torch.Tensor | None = None) -> None:
        """Feed `ids` (default: `token`), appending their keys/values at the cache's length;
        write the greedy next token into `token`."""
        logits = self.model(input_ids=self.token if ids is None else ids, cache=self.cache,
                            use_cache=True, logits_to_keep=1).logits[:, -1, :]  # [1, V]
        self.token.copy_(logits.argmax(-1, keepdim=True))

    @torch.inference_mode()
    def step(self) -> torch.Tensor:
        """One decode step (a graph replay once captured); returns a copy of the new token."""
        if self.graph is not None:
            self.graph.replay()
        else:
            self._step()
        return self.token.clone()

    @torch.inference_mode()
    def capture(self, warm_up_steps: int = WARM_UP_STEPS) -> list[int]:
        """CUDA only: run `warm_up_steps` real eager steps on a side stream, then record one
        step. Returns the warm-up steps' tokens (they are part of the sequence)."""
        if self.device.type != "cuda":
            raise RuntimeError("CUDA graphs need a CUDA device; use step() eagerly on a CPU.")
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        tokens = []
        with torch.cuda.stream(side):
            for _ in range(warm_up_steps):
                self._step()
                tokens.append(self.token.clone())
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        # Recorded, not run: the cache does not advance here. "thread_local": in the app other
        # visitors' threads may launch work meanwhile; only this thread's calls are captured.
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            self._step()
        self.graph = graph
        return [int(t) for t in tokens]


def captured_greedy(model, prompt_ids: list[int], new_tokens: int, capture: bool = True
                    ) -> CapturedRun:
    """Greedy decode of `new_tokens` tokens with a static cache; captured on CUDA if asked.

    Example (CPU, eager): `captured_greedy(lm.model, ids, 8, capture=False).token_ids` equals
    the engine's first 8 greedy tokens."""
    if new_tokens < 1:
        raise ValueError("new_tokens must be at least 1")
    device = next(model.parameters()).device
    capture = capture and device.type == "cuda"
    dec = StaticDecoder(model, max_len=len(prompt_ids) + new_tokens + WARM_UP_STEPS + 1)
    with stopwatch(device) as pre:
        ids = [dec.prefill(prompt_ids)]
    with stopwatch(device) as rec:
        if capture and new_tokens > 1:
            ids += dec.capture(min(WARM_UP_STEPS, new_tokens - 1))
    steps = max(0, new_tokens - len(ids))
    with stopwatch(device) as run:
        outs = [dec.step() for _ in range(steps)]  # no sync per step: tokens read at the end
    ids += [int(t) for t in outs]
    return CapturedRun(tuple(ids), dec.graph is not None, pre[0],
                       rec[0] if capture else 0.0, run[0], steps)
