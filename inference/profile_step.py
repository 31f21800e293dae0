"""What bounds one decode step here, and the step without its launch overhead.

Measured steps sit below the roofline's ceiling; `profile_decode_step` says why, from real
steps under `torch.profiler`: operations per step, time inside the big matrix products, inside
every other operation and left over (Python); on a GPU also kernels and the share it was busy.
`tiny_op_seconds` is the fixed cost of one do-nothing operation.

`captured_greedy` records one step as a CUDA graph and replays it with one launch. That needs a
*static* cache (allocated once, written in place) and a static input: the newest token lives in
one [1, 1] tensor the step overwrites with its greedy choice. On a CPU the step runs eagerly
(how the tests check its tokens). Left out: sampling, batches, stop tokens.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import StaticCache

from .generation import decode_step, prefill
from .timing import stopwatch

# The big matrix products: every Linear (q/k/v/o, gate/up/down) and the output head.
MATMUL_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::mkldnn_linear",
                        "aten::_weight_int8pack_mm",
                        "aten::_weight_int4pack_mm", "aten::_weight_int4pack_mm_for_cpu"})


@dataclass(frozen=True)
class StepProfile:
    device: str  # "cpu" or "cuda:0"
    steps: int  # decode steps profiled
    step_seconds: float  # median wall time of one step, without the profiler
    ops_per_step: float  # aten operations dispatched per step (nested ones counted too)
    matmul_seconds: float  # per step, inside the big matrix products (MATMUL_OPS)
    overhead_share: float  # 0..1: share of the step outside the big matrix products
    matmul_ops_per_step: float = 0.0  # how many of `ops_per_step` are big matrix products
    other_ops_seconds: float = 0.0  # per step, self time of every other op (CPU) or kernel (GPU)
    kernels_per_step: float | None = None  # GPU kernels launched per step (CUDA only)
    device_busy_share: float | None = None  # 0..1: share of the step the GPU ran kernels

    @property
    def matmul_share(self) -> float:
        return 1.0 - self.overhead_share

    @property
    def between_ops_seconds(self) -> float:
        """Per step, time inside no operation: Python and framework code (a GPU sits idle)."""
        return max(0.0, self.step_seconds - self.matmul_seconds - self.other_ops_seconds)


def _timed_steps(model, token: torch.Tensor, cache, n: int) -> tuple[list[float], torch.Tensor]:
    times = []
    for _ in range(n):
        with stopwatch(token.device) as t:
            token = decode_step(model, token, cache).argmax(-1)  # [1]
        times.append(t[0])
    return times, token


def _device_time_us(event) -> float:
    """A kernel event's device time in µs, across profiler versions."""
    names = ("device_time", "cuda_time", "device_time_total", "cuda_time_total")
    return float(next((v for v in (getattr(event, n, None) for n in names) if v), 0.0))


def profile_decode_step(model, prompt_ids: list[int], steps: int = 4) -> StepProfile:
    """Profile `steps` greedy decode steps after a prefill of `prompt_ids` (batch 1)."""
    device = next(model.parameters()).device
    pre = prefill(model, torch.tensor([prompt_ids], device=device))
    token = pre.logits.argmax(-1)  # [1]
    times, token = _timed_steps(model, token, pre.cache, steps + 1)  # first one is warm-up
    step_s = statistics.median(times[1:])
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        profiled, _ = _timed_steps(model, token, pre.cache, steps)
    events = prof.events()
    on_gpu = [getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA for e in events]
    cpu_ops = [e for e, g in zip(events, on_gpu) if e.name.startswith("aten::") and not g]
    matmuls = [e for e in cpu_ops if e.name in MATMUL_OPS]
    matmul_us = sum(e.self_cpu_time_total for e in matmuls)
    other_us = sum(e.self_cpu_time_total for e in cpu_ops) - matmul_us
    # On a CPU the profiler slows every operation a little: its split is read as shares of the
    # profiled step, applied to the step timed without it (and capped by it below).
    scale = step_s / statistics.median(profiled)
    kernels = busy = None
    if cuda:
        gpu = [e for e, g in zip(events, on_gpu) if g]
        kernels = len(gpu) / steps
        kernel_us = sum(_device_time_us(e) for e in gpu)
        busy = min(1.0, kernel_us / 1e6 / steps / step_s)
        matmul_us = sum(_device_time_us(e) for e in gpu
                        if any(k in e.name.lower() for k in ("gemm", "gemv", "matmul", "int4")))
        other_us = kernel_us - matmul_us  # on a GPU: the step's other kernels, device time
        scale = 1.0  # kernels' device time is not slowed by the profiler's bookkeeping
    matmul_s = min(step_s, matmul_us / 1e6 / steps * scale)
    other_s = min(step_s - matmul_s, other_us / 1e6 / steps * scale)
    return StepProfile(device=str(device), steps=steps, step_seconds=step_s,
                       ops_per_step=len(cpu_ops) / steps, matmul_seconds=matmul_s,
                       overhead_share=min(1.0, max(0.0, 1.0 - matmul_s / step_s)),
                       matmul_ops_per_step=len(matmuls) / steps, other_ops_seconds=other_s,
                       kernels_per_step=kernels, device_busy_share=busy)


def tiny_op_seconds(device: torch.device | str, n: int = 2000, repeats: int = 5) -> float:
    """Seconds of one operation that does almost nothing (adding two one-element tensors),
    median of `repeats` runs of `n`, synced: what every operation pays on top of its arithmetic."""
    a = torch.ones(1, device=device)
    times = []
    for _ in range(repeats):
        with stopwatch(device) as t:
            for _ in range(n):
                torch.add(a, a)
        times.append(t[0] / n)
    return statistics.median(times)


WARM_UP_STEPS = 2  # eager steps on a side stream before capture (CUDA's allocator warms up)


@dataclass(frozen=True)
class CapturedRun:
    token_ids: tuple[int, ...]  # the prompt's first greedy token, then one per decode step
    captured: bool  # True: the decode steps were CUDA-graph replays; False: eager steps
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
        """The whole prompt in one eager pass -> the first greedy token (also in `token`)."""
        self._step(torch.tensor([prompt_ids], device=self.device))  # [1, P]
        return int(self.token)

    def _step(self, ids: torch.Tensor | None = None) -> None:
        """Feed `ids` (default: `token`) into the cache; write the greedy next token to `token`."""
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
    """Greedy decode of `new_tokens` tokens with a static cache; captured on CUDA if asked."""
    if new_tokens < 1:
        raise ValueError("new_tokens must be at least 1")
    device = next(model.parameters()).device
    capture = capture and device.type == "cuda"
    dec = StaticDecoder(model, max_len=len(prompt_ids) + new_tokens + WARM_UP_STEPS + 1)
    ids = [dec.prefill(prompt_ids)]
    with stopwatch(device) as rec:
        if capture and new_tokens > 1:
            ids += dec.capture(min(WARM_UP_STEPS, new_tokens - 1))
    steps = max(0, new_tokens - len(ids))
    with stopwatch(device) as run:
        outs = [dec.step() for _ in range(steps)]  # no sync per step: tokens read at the end
    ids += [int(t) for t in outs]
    return CapturedRun(tuple(ids), dec.graph is not None, rec[0] if capture else 0.0, run[0],
                       steps)
