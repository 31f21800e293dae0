"""Long contexts, measured up to the window (the theory beside them: `context_theory.py`).

One prefill per prompt length; one decode step per cache length (a prefill of the longest,
cropped for each shorter), which also copies the cache once (`DynamicCache` grows by
concatenation: bytes the floor does not count). Attention's peak memory: "eager" writes out
the whole [batch, heads, L, L] score table, "sdpa" (flash-style kernels) walks the keys in tiles
with a running maximum and sum, so it never exists.
"""
from __future__ import annotations

import copy
import ctypes
import ctypes.util
import statistics
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import psutil
import torch
from transformers import DynamicCache

from ..errors import PromptTooLongError
from ..generation import decode_step, forward, prefill
from ..kv_cache import cache_length, cache_tensor_bytes, crop_to
from ..timing import stopwatch
from .prefill_sweep import WARM_UP_TOKENS, sweep_tokens


def check_fits_window(tokens: int, window: int, what: str = "A prompt") -> None:
    """Refuse `tokens` positions beyond the model's context window, saying why."""
    if tokens > window:
        raise PromptTooLongError(
            f"{what} of {tokens:,} tokens is beyond this model's context window of "
            f"{window:,} tokens: it was trained on positions 0 to {window - 1:,} only, so it "
            f"cannot read that far. Choose {window:,} tokens or fewer.")


def prefill_lengths(settings, window: int) -> tuple[int, ...]:
    """The Settings' prompt lengths below the window, then the window."""
    return tuple(sorted({n for n in settings.context_prefill_lengths if 0 < n < window}
                        | {window}))


def decode_lengths(settings, window: int) -> tuple[int, ...]:
    """The Settings' cache lengths that leave room for the step's own token, and window - 1."""
    return tuple(sorted({n for n in settings.context_decode_lengths if 0 <= n < window}
                        | {window - 1}))


@dataclass(frozen=True)
class PrefillLengthPoint:
    tokens: int  # prompt length L
    seconds: float  # one prefill pass over the L tokens, device synced (best of the repeats)
    cache_tokens: int  # positions the cache's key tensors held after it (read from them)

    @property
    def seconds_per_token(self) -> float:
        return self.seconds / self.tokens


@dataclass(frozen=True)
class LengthsProgress:
    done: int  # points measured so far
    total: int  # points in the sweep (decode: lengths × batches)
    points: tuple
    next_tokens: int | None = None  # prefill: the length measured next; None when finished


@torch.inference_mode()
def prefill_lengths_sweep(lm, lengths: Iterable[int], repeats: int = 1
                          ) -> Iterator[LengthsProgress]:
    lengths = sorted(set(lengths))
    window = lm.info.context_window
    check_fits_window(max(lengths), window)
    model, device = lm.model, lm.device
    forward(model, torch.tensor([sweep_tokens(lm.tokenizer, WARM_UP_TOKENS)], device=device),
            DynamicCache())  # warm-up, untimed
    points: list[PrefillLengthPoint] = []
    for i, n in enumerate(lengths):
        x = torch.tensor([sweep_tokens(lm.tokenizer, n)], device=device)  # [1, L]
        best, held = float("inf"), 0
        for _ in range(max(1, repeats)):
            run = prefill(model, x)
            best, held = min(best, run.seconds), cache_length(run.cache)
            del run
        points.append(PrefillLengthPoint(n, best, held))
        nxt = lengths[i + 1] if i + 1 < len(lengths) else None
        yield LengthsProgress(i + 1, len(lengths), tuple(points), nxt)


@dataclass(frozen=True)
class DecodeLengthPoint:
    batch: int  # rows decoded together in the step
    cache_tokens: int  # positions each row's cache held when the step ran (read from tensors)
    cache_bytes: int  # bytes the real key/value tensors held then, all rows
    seconds: float  # one decode step, device synced (median of the repeats)
    seconds_min: float  # fastest repeat (the run's own noise: min to max)
    seconds_max: float  # slowest repeat


@dataclass(frozen=True)
class LengthComparison:
    short: DecodeLengthPoint
    long: DecodeLengthPoint
    ratio: float  # long step ÷ short step (medians)
    beyond_noise: bool  # the two steps' ranges (min to max over the repeats) do not overlap


def compare_lengths(points, short: int, long: int, batch: int = 1
                    ) -> LengthComparison | None:
    """The points at `batch` nearest to `short` and `long` cache tokens (None: not two)."""
    mine = [p for p in points if p.batch == batch]
    if len(mine) < 2:
        return None
    near = min(mine, key=lambda p: abs(p.cache_tokens - short))
    far = min(mine, key=lambda p: abs(p.cache_tokens - long))
    if near is far:
        return None
    apart = far.seconds_min > near.seconds_max or near.seconds_min > far.seconds_max
    return LengthComparison(near, far, far.seconds / near.seconds, apart)


def _time_steps(model, cache: DynamicCache, tokens: int, token_id: int, batch: int,
                repeats: int, device) -> DecodeLengthPoint:
    """Cut the cache back to `tokens` before each of `repeats` timed steps."""
    times, held, nbytes = [], 0, 0
    token = torch.full((batch,), token_id, device=device)  # [B]
    for _ in range(repeats):
        crop_to(cache, tokens)
        held, nbytes = cache_length(cache), cache_tensor_bytes(cache)
        with stopwatch(device) as t:
            decode_step(model, token, cache)
        times.append(t[0])
    return DecodeLengthPoint(batch, held, nbytes, statistics.median(times), min(times),
                             max(times))


@torch.inference_mode()
def decode_lengths_sweep(lm, lengths: Iterable[int], batches: Iterable[int] = (1, 8),
                         repeats: int = 3) -> Iterator[LengthsProgress]:
    """Time one decode step at each cache length (longest first) and batch."""
    lengths, batches = sorted(set(lengths), reverse=True), sorted(set(batches))
    check_fits_window(lengths[0] + 1, lm.info.context_window,
                      "A cache plus the step's own token")
    model, device = lm.model, lm.device
    ids = sweep_tokens(lm.tokenizer, lengths[0] + 1)
    base = prefill(model, torch.tensor([ids[:max(lengths[0], 1)]], device=device)).cache
    points: list[DecodeLengthPoint] = []
    total = len(lengths) * len(batches)
    for batch in batches:
        cache = copy.deepcopy(base)
        if batch > 1:
            cache.batch_repeat_interleave(batch)  # keys: [B, H_kv, S, D]
        _time_steps(model, cache, lengths[0], ids[lengths[0]], batch, 1, device)  # warm-up
        for n in lengths:
            points.append(_time_steps(model, cache, n, ids[n], batch, max(1, repeats), device))
            yield LengthsProgress(len(points), total, tuple(points))
        del cache


def prefill_lengths_tokens(lengths: Iterable[int], repeats: int = 1) -> int:
    """Tokens `prefill_lengths_sweep` feeds: its warm-up, then `repeats` prefills per length."""
    return WARM_UP_TOKENS + max(1, repeats) * sum(set(lengths))


def decode_lengths_tokens(lengths: Iterable[int], batches: Iterable[int], repeats: int) -> int:
    """Tokens `decode_lengths_sweep` feeds: one prefill of the longest, then per batch b a
    warm-up step and `repeats` steps per length, b tokens each."""
    lengths = set(lengths)
    steps = 1 + len(lengths) * max(1, repeats)
    return max(max(lengths), 1) + sum(b * steps for b in set(batches))


CUDA_METHOD = "CUDA allocator peak (torch.cuda.max_memory_allocated) above the start"
HWM_METHOD = "peak resident memory of this process (Linux VmHWM, reset first) above the start"
SAMPLED_METHOD = "resident memory of this process, sampled every millisecond, above the start"


@dataclass(frozen=True)
class PeakMemory:
    implementation: str  # "eager" or "sdpa"
    tokens: int  # prompt length of the prefill
    peak_bytes: int  # measured: the highest memory during the pass, minus the memory before it
    method: str  # how it was measured on this device (CUDA_METHOD, HWM_METHOD, SAMPLED_METHOD)
    scores_bytes: int  # theoretical: one layer's full score table, heads × L² × bytes per value
    seconds: float  # the prefill's synced wall time

    @property
    def sampled(self) -> bool:
        """True where the peak was sampled (it can miss the top while the CPU is busy)."""
        return self.method == SAMPLED_METHOD


def _vm_hwm(reset: bool = False) -> int | None:
    """Peak resident bytes (Linux; `reset`: set back to the current size first), or None."""
    try:
        if reset:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM to the current resident size
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def peak_method(device: torch.device | str) -> str:
    if torch.device(device).type == "cuda":
        return CUDA_METHOD
    return HWM_METHOD if _vm_hwm(reset=True) is not None else SAMPLED_METHOD


def measure_peak(device: torch.device | str, run: Callable[[], object]) -> tuple[int, str]:
    """(peak bytes above the start while `run()` ran, the method used on this device)."""
    dev = torch.device(device)
    method = peak_method(dev)
    if method == CUDA_METHOD:
        torch.cuda.synchronize(dev)
        start = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        run()
        torch.cuda.synchronize(dev)
        return torch.cuda.max_memory_allocated(dev) - start, method
    # glibc's malloc_trim hands freed heap pages back, so the pass's allocations show in the
    # resident size instead of reusing retained pages
    try:
        ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)
    except (OSError, AttributeError, TypeError):
        pass  # not glibc: the measurement may under-count reused pages
    start = psutil.Process().memory_info().rss
    if method == HWM_METHOD:
        _vm_hwm(reset=True)  # the high-water mark starts from now
        run()
        return max(0, (_vm_hwm() or start) - start), method
    peak, stop = [start], threading.Event()

    def watch() -> None:
        while not stop.wait(0.001):
            peak[0] = max(peak[0], psutil.Process().memory_info().rss)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        run()
    finally:
        stop.set()
        thread.join()
    return max(peak[0], psutil.Process().memory_info().rss) - start, method


@torch.inference_mode()
def prefill_peak_memory(lm, tokens: int, implementation: str) -> PeakMemory:
    check_fits_window(tokens, lm.info.context_window)
    x = torch.tensor([sweep_tokens(lm.tokenizer, tokens)], device=lm.device)  # [1, L]
    seconds = [0.0]

    def run() -> None:
        seconds[0] = prefill(lm.model, x).seconds  # the cache is dropped when it returns

    before = lm.model.config._attn_implementation
    lm.model.set_attn_implementation(implementation)
    try:
        peak, method = measure_peak(lm.device, run)
    finally:
        lm.model.set_attn_implementation(before)  # the model's own comes back
    scores = lm.info.heads * tokens ** 2 * lm.bytes_per_value
    return PeakMemory(implementation, tokens, peak, method, scores, seconds[0])


def compare_attention_memory(lm, tokens: int, max_eager_tokens: int
                             ) -> Iterator[PeakMemory]:
    """The same prefill with "sdpa", then "eager", capped (eager's tables grow with L²)."""
    n = min(tokens, max_eager_tokens)
    for name in ("sdpa", "eager"):
        yield prefill_peak_memory(lm, n, name)


def attention_memory_tokens(tokens: int, max_eager_tokens: int) -> int:
    """Tokens `compare_attention_memory` feeds: the same capped prefill twice."""
    return 2 * min(tokens, max_eager_tokens)
