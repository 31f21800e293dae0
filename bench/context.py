"""`make bench`'s "context" section: long contexts to the model's window, measured
with the lesson's own functions.

    prefill at each prompt length to the window (seconds), the L² share of the fit at the window,
    one decode step at each cache length at batch 1 and 8 (ms), L* per batch (theoretical, from
    the loaded model's bytes and the measured bandwidth), eager vs sdpa peak memory of one
    prefill (measured; eager capped by `Settings.context_eager_max_tokens`).

Run alone: `.venv/bin/python -m bench.context` (prints the dict as JSON; ~3-5 minutes on 2 cores,
mostly the 8,192-token prefills).
"""
from __future__ import annotations

import json
import time

from inference.config import LIMITS, Settings
from inference.experiments.attention_memory import compare_attention_memory
from inference.experiments.context_sweep import (
    decode_lengths,
    decode_lengths_sweep,
    prefill_lengths,
    prefill_lengths_sweep,
)
from inference.experiments.context_theory import decode_theory, fit_quadratic


def _last(progress):
    record = None
    for record in progress:
        print(f"  context: {record.done}/{record.total}", flush=True)
    return record


def measure_context(lm, settings: Settings = LIMITS) -> dict:
    """The bench's "context" keys (plus the fit, the bandwidth and the floor beside them)."""
    window = lm.info.context_window
    started = time.perf_counter()
    pre = _last(prefill_lengths_sweep(lm, prefill_lengths(settings, window),
                                      settings.context_prefill_repeats)).points
    curve = fit_quadratic([p.tokens for p in pre], [p.seconds for p in pre])
    dec = _last(decode_lengths_sweep(lm, decode_lengths(settings, window),
                                     settings.context_decode_batches,
                                     settings.context_decode_repeats)).points
    theory = decode_theory(lm)
    peaks = {p.implementation: p for p in
             compare_attention_memory(lm, window, settings.context_eager_max_tokens)}
    top = max(p.tokens for p in pre)

    def by_batch(value) -> dict:  # {"b1": {cache tokens: value(point)}, "b8": ...}
        return {f"b{b}": {p.cache_tokens: value(p) for p in
                          sorted(dec, key=lambda p: p.cache_tokens) if p.batch == b}
                for b in sorted({p.batch for p in dec})}
    steps = by_batch(lambda p: round(p.seconds * 1000, 2))
    spread = by_batch(lambda p: [round(p.seconds_min * 1000, 2), round(p.seconds_max * 1000, 2)])
    floor = {f"b{b}": {n: round(theory.seconds(n, b) * 1000, 2) for n in row}
             for b, row in ((int(k[1:]), v) for k, v in steps.items())}
    return {
        "tokens_max": top,
        "prefill_seconds": {p.tokens: round(p.seconds, 3) for p in pre},
        "quadratic_share_at_max": round(curve.quadratic_share(top), 3),
        "quadratic_measurable_at_max": curve.quadratic_is_measurable(top),
        "fit_seconds": {"a": curve.a, "b_per_token": curve.b, "c_per_token2": curve.c,
                        "rms": curve.rms_seconds},
        "decode_step_ms": steps,
        "decode_step_range_ms": spread,  # fastest and slowest repeat: this run's noise
        "decode_floor_ms": floor,
        "kv_reads_equal_weights_tokens_b1": theory.crossover_tokens(1),
        "kv_reads_equal_weights_tokens_b8": theory.crossover_tokens(8),
        "bandwidth_gbs": round(theory.bandwidth_gbs, 2),
        "weight_bytes": theory.weight_bytes,
        "kv_bytes_per_token": theory.kv_bytes_per_token,
        "peak_mb_eager": round(peaks["eager"].peak_bytes / 1e6, 1),
        "peak_mb_sdpa": round(peaks["sdpa"].peak_bytes / 1e6, 1),
        "peak_tokens": peaks["eager"].tokens,
        "peak_method": peaks["eager"].method,
        "seconds": round(time.perf_counter() - started, 1),
    }


if __name__ == "__main__":
    from inference.loading import load_model

    print(json.dumps(measure_context(load_model()), indent=2))
