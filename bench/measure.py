"""The benchmark's measurements, one function per headline figure.

Every figure is the median of repeated runs after a warm-up, with the device synced before
each clock read (inference.timing). Things compared are measured interleaved in one run, so
a noisy neighbour slows both sides alike and the ratio stays meaningful.
"""
from __future__ import annotations

import statistics
import time

import torch

from inference.batching import batch_generate
from inference.engine import recompute_logits
from inference.experiments.prefill_sweep import sweep_tokens, time_parallel
from inference.generation import stream
from inference.kv_cache import kv_cache_bytes
from inference.timing import stopwatch


def median(xs) -> float:
    return float(statistics.median(xs))


def engine_decode_rate(lm, ids: list[int], new_tokens: int) -> float:
    """Engine decode tokens/s: tokens after the first ÷ their summed step times."""
    events = list(stream(lm, ids, max_new_tokens=new_tokens))
    assert len(events) == new_tokens, "prompt must not reach end of turn early"
    return (len(events) - 1) / sum(e.seconds for e in events[1:])


@torch.inference_mode()
def generate_decode_rate(lm, ids: list[int], new_tokens: int) -> float:
    """model.generate() decode tokens/s, as the difference of an N-token and a 1-token run
    (which removes prefill and set-up, like the engine's figure)."""
    x = torch.tensor([ids], device=lm.device)
    kw = dict(do_sample=False, pad_token_id=lm.tokenizer.eos_token_id)
    with stopwatch(lm.device) as one:
        lm.model.generate(x, max_new_tokens=1, min_new_tokens=1, **kw)
    with stopwatch(lm.device) as full:
        lm.model.generate(x, max_new_tokens=new_tokens, min_new_tokens=new_tokens, **kw)
    return (new_tokens - 1) / max(full[0] - one[0], 1e-9)


def decode_comparison(lm, ids: list[int], new_tokens: int = 32, repeats: int = 5) -> dict:
    """Engine vs generate, run in alternating pairs; the ratio is the median of the pairs'
    ratios, so a slow spell on a shared machine hits both sides of a pair alike."""
    engine_decode_rate(lm, ids, 4)  # warm-up
    generate_decode_rate(lm, ids, 4)
    eng, gen = [], []
    for i in range(repeats):  # interleaved, alternating which goes first
        if i % 2:
            gen.append(generate_decode_rate(lm, ids, new_tokens))
            eng.append(engine_decode_rate(lm, ids, new_tokens))
        else:
            eng.append(engine_decode_rate(lm, ids, new_tokens))
            gen.append(generate_decode_rate(lm, ids, new_tokens))
    ratios = [e / g for e, g in zip(eng, gen)]
    return {"new_tokens": new_tokens, "engine_tokens_per_s": median(eng),
            "generate_tokens_per_s": median(gen), "engine_vs_generate": median(ratios),
            "engine_runs": eng, "generate_runs": gen}


def prefill_lengths(lm, lengths=(16, 64, 256, 1024)) -> list[dict]:
    out = []
    time_parallel(lm.model, sweep_tokens(lm.tokenizer, 8), lm.device)  # warm-up
    for n in lengths:
        s = time_parallel(lm.model, sweep_tokens(lm.tokenizer, n), lm.device, repeats=3)
        out.append({"tokens": n, "seconds": s, "tokens_per_s": n / s})
    return out


def kv_cache_race(lm, ids: list[int], new_tokens: int = 64) -> dict:
    """Same greedy run with the cache (engine) and by recomputing the whole sequence."""
    with stopwatch(lm.device) as cached_t:
        events = list(stream(lm, ids, max_new_tokens=new_tokens))
    tokens = [e.token_id for e in events]
    seq = list(ids)
    with stopwatch(lm.device) as full_t:
        recomputed = []
        for _ in range(len(tokens)):
            nxt = int(torch.argmax(recompute_logits(lm.model, seq, lm.device)))
            recomputed.append(nxt)
            seq.append(nxt)
    info = lm.info
    per_token = kv_cache_bytes(info.layers, info.kv_heads, info.head_dim, lm.bytes_per_value, 1)
    last = events[-1]
    return {"prompt_tokens": len(ids), "new_tokens": len(tokens),
            "seconds_with_cache": cached_t[0], "seconds_without_cache": full_t[0],
            "speedup": full_t[0] / cached_t[0], "same_tokens": recomputed == tokens,
            "bytes_per_token_measured": last.cache_bytes / last.cache_tokens,
            "bytes_per_token_formula": per_token}


def batch_sweep(lm, ids: list[int], sizes=(1, 2, 4, 8, 16, 32, 64), steps: int = 8) -> dict:
    rows = []
    for b in sizes:
        list(batch_generate(lm, [ids] * b, 2, stop_at_eos=False))  # warm-up at this shape
        out = list(batch_generate(lm, [ids] * b, steps + 1, stop_at_eos=False))
        step_s = median([s.seconds for s in out[1:]])
        rows.append({"batch": b, "step_seconds": step_s, "tokens_per_s": b / step_s,
                     "per_request_tokens_per_s": 1 / step_s})
    return {"sizes": rows,
            "throughput_ratio_max_vs_1": rows[-1]["tokens_per_s"] / rows[0]["tokens_per_s"]}


def copy_bandwidth_gbs(device: torch.device | str, megabytes: int = 256, repeats: int = 5
                       ) -> float:
    """GB/s of copying a large float32 buffer, read + write bytes counted (2N per copy of N),
    the median of `repeats` copies after one that touches the pages. For comparison with the
    read-only figure (inference.experiments.roofline.measure_read_bandwidth) that sets the roof.
    """
    src = torch.ones(megabytes * 1024 * 1024 // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)  # warm-up
    times = []
    for _ in range(repeats):
        with stopwatch(device) as t:
            dst.copy_(src)
        times.append(t[0])
    return 2 * src.numel() * src.element_size() / median(times) / 1e9


def wall(fn) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out
