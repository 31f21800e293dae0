"""The benchmark's measurements, one function per headline figure. Where a lesson measures the
figure, the bench calls the lesson's own function (the KV race, the batch sweep, the
quantization comparison), so README's figures and the lesson's come from one place.

Every figure is the median of repeated runs after a warm-up, with the device synced before
each clock read (inference.timing). Things compared are measured interleaved in one run, so
a noisy neighbour slows both sides alike and the ratio stays meaningful.
"""
from __future__ import annotations

from statistics import median

import torch

from bench.workloads import BATCH_STEPS, KV_RACE_TOKENS, MAX_BATCH, QUANT_MODES, QUANT_NEW_TOKENS
from inference.experiments.batch_sweep import run_sweep
from inference.experiments.kv_growth import watch_growth
from inference.experiments.kv_race import race, summarize
from inference.experiments.memory_guard import memory_budget_bytes
from inference.experiments.prefill_sweep import sweep_tokens, time_parallel
from inference.experiments.roofline import Roofline
from inference.generation import stream
from inference.kv_cache import kv_cache_bytes
from inference.timing import stopwatch
from inference.weights import bytes_read_per_token


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
    lanes = [(eng, engine_decode_rate), (gen, generate_decode_rate)]
    for i in range(repeats):  # interleaved, alternating which goes first
        for runs, rate in lanes[::-1] if i % 2 else lanes:
            runs.append(rate(lm, ids, new_tokens))
    ratios = [e / g for e, g in zip(eng, gen)]
    return {"new_tokens": new_tokens, "engine_tokens_per_s": median(eng),
            "generate_tokens_per_s": median(gen), "engine_vs_generate": median(ratios),
            "engine_runs": eng, "generate_runs": gen}


def decode(lm, ids: list[int], bandwidth_gbs: float) -> dict:
    """Engine against `generate()`, and the engine's share of the bandwidth ceiling (the
    weights and the cache a step reads, in the loaded dtype's bytes per value)."""
    dec = decode_comparison(lm, ids)
    info = lm.info
    kv_bytes = kv_cache_bytes(info.layers, info.kv_heads, info.head_dim, lm.bytes_per_value,
                              tokens=len(ids) + 24)
    roof = Roofline(bandwidth_gbs, bytes_read_per_token(lm.model) + kv_bytes,
                    dec["engine_tokens_per_s"])
    return dec | {"roofline_tokens_per_s": roof.ceiling_tokens_per_s,
                  "fraction_of_roofline": roof.fraction,
                  "bytes_read_per_token": roof.bytes_per_token, "bandwidth_read_gbs": bandwidth_gbs}


def prefill_speeds(lm, lengths=(16, 64, 256, 1024)) -> list[dict]:
    out = []
    time_parallel(lm.model, sweep_tokens(lm.tokenizer, 8), lm.device)  # warm-up
    for n in lengths:
        s = time_parallel(lm.model, sweep_tokens(lm.tokenizer, n), lm.device, repeats=3)
        out.append({"tokens": n, "seconds": s, "tokens_per_s": n / s})
    return out


def kv_cache_race(lm, ids: list[int], new_tokens: int = KV_RACE_TOKENS) -> dict:
    """Lesson 4's own race (`inference.experiments.kv_race`): the same greedy tokens with the
    cache and by recomputing the whole sequence, the lanes taking turns step by step."""
    steps = list(race(lm, ids, new_tokens))
    s = summarize(steps, len(ids))
    info = lm.info
    per_token = kv_cache_bytes(info.layers, info.kv_heads, info.head_dim, lm.bytes_per_value, 1)
    grown = list(watch_growth(lm, ids, max_new_tokens=2))[-1].cache  # the real tensors
    return {"prompt_tokens": s.prompt_tokens, "new_tokens": s.new_tokens,
            "seconds_with_cache": s.cached_seconds, "seconds_without_cache": s.recompute_seconds,
            "speedup": s.speedup, "same_tokens": s.same_tokens,
            "work_ratio": s.work_ratio, "max_logit_gap": s.max_logit_gap,
            "bytes_per_token_measured": grown.tensor_bytes / grown.tokens,
            "bytes_per_token_formula": per_token, "function": "inference.experiments.kv_race"}


def batch_sweep(lm, ids: list[int], max_batch: int = MAX_BATCH, steps: int = BATCH_STEPS
                ) -> dict:
    """Lesson 5's own sweep (`inference.experiments.batch_sweep.run_sweep`): B copies of the
    prompt at B = 1, 2, 4, ... `max_batch`, the median of `steps` timed decode steps each."""
    *_, done = run_sweep(lm, ids, max_batch, steps, memory_budget_bytes(lm.device, 0.5))
    rows = [{"batch": p.batch, "step_seconds": p.step_seconds, "tokens_per_s": p.tokens_per_s,
             "per_request_tokens_per_s": p.per_request_tokens_per_s} for p in done.points]
    return {"sizes": rows, "bandwidth_read_gbs": done.bandwidth_gbs,
            "skipped": [p.batch for p in done.plans if not p.fits],
            "throughput_ratio_max_vs_1": rows[-1]["tokens_per_s"] / rows[0]["tokens_per_s"],
            "function": "inference.experiments.batch_sweep.run_sweep"}


def _mode_figures(r) -> dict:
    return {"weight_bytes": r.weight_bytes, "ratio_to_fp32": r.ratio_to_fp32,
            "kernel": r.kernel, "decode_tokens_per_s": r.decode_tokens_per_s,
            "prefill_seconds": r.prefill_seconds, "top1_agreement": r.top1_agreement,
            "top1_agreement_decided": r.top1_decided, "kl": r.kl_mean,
            "perplexity": r.perplexity}


def quantization(lm, prompt: str, modes=QUANT_MODES, new_tokens: int = QUANT_NEW_TOKENS
                 ) -> dict:
    """Lesson 6's own comparison (`lessons.quantization_handlers.compare_frames`, plain: no
    Gradio): every mode against float32 on `prompt`. Where one mode fails (a kernel missing
    on a device), each mode is compared alone so the others' figures still come back."""
    from inference.config import LIMITS
    from inference.experiments.shared_results import SharedResults
    from lessons.quantization_handlers import compare_frames

    shared = SharedResults()
    try:
        *_, last = compare_frames(lm, LIMITS, shared, prompt, list(modes), new_tokens)
        return {r.key: _mode_figures(r) for r in last.reports}
    except Exception as first_error:  # noqa: BLE001 - recorded per mode below
        out = {"error_all_modes": f"{type(first_error).__name__}: {first_error}"}
    for key in modes:
        try:
            *_, last = compare_frames(lm, LIMITS, shared, prompt, [key], new_tokens)
            out[key] = _mode_figures(next(r for r in last.reports if r.key == key))
        except Exception as exc:  # noqa: BLE001 - one broken mode must not hide the others
            out[key] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


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

