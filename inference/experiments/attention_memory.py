"""Attention's memory: the L × L score table, written out in full or computed in tiles.

"eager" attention keeps the whole [batch, heads, L, L] table; "sdpa" (flash-style kernels)
walks the keys in tiles with a running maximum and sum, so it never exists. One prefill each,
its peak memory above the start measured: everything else being equal, the difference is the
score tables.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psutil
import torch

from ..engine import prefill
from .context_sweep import check_fits_window
from .prefill_sweep import sweep_tokens

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


def _rss() -> int:
    return psutil.Process().memory_info().rss


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
    start = _rss()
    if method == HWM_METHOD:
        _vm_hwm(reset=True)  # the high-water mark starts from now
        run()
        return max(0, (_vm_hwm() or start) - start), method
    peak, stop = [start], threading.Event()

    def watch() -> None:
        while not stop.wait(0.001):
            peak[0] = max(peak[0], _rss())

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        run()
    finally:
        stop.set()
        thread.join()
    return max(peak[0], _rss()) - start, method


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
