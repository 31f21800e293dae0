"""The benchmark's measurements and their prompts, one function per headline figure, each calling
the lesson's own function where a lesson measures it (so README's figures and the lesson's
agree): medians of repeats after a warm-up, things compared measured interleaved. One section
alone: `python -m bench.measure context` (or `speculative`).
"""
from __future__ import annotations

import json
import os
import sys
import time
from statistics import median

import torch

from inference.config import LIMITS, Settings
from inference.experiments import context_sweep as sweep
from inference.experiments import context_theory, spec_expectation
from inference.experiments import speculative_race as spec
from inference.experiments.attention_view import watch_growth
from inference.experiments.batch_sweep import memory_budget_bytes, run_sweep
from inference.experiments.context_sweep import compare_attention_memory
from inference.experiments.kv_race import race, summarize
from inference.experiments.prefill_sweep import sweep_tokens, time_parallel
from inference.experiments.roofline import Roofline
from inference.experiments.shared_results import SharedResults
from inference.generation import stream
from inference.kv_cache import kv_cache_bytes
from inference.loading import bytes_read_per_token, load_model
from inference.speculative import make_draft
from inference.timing import stopwatch
from inference.tokens import prompt_ids

PROMPT = "Write a long story about a lighthouse keeper who finds a message in a bottle."
KV_PROMPT = "Tell me a long story about a brave little robot."  # 41 tokens with the template
QUALITY_PROMPT = "Explain why the sky is blue, in detail, for a curious student."
QUANT_MODES = ("fp32", "fp16", "bf16", "int8", "int4-g32")
QUANT_NEW_TOKENS = 32  # greedy tokens each mode is compared on
KV_RACE_TOKENS = 64  # the KV race's length (README's race figure)
MAX_BATCH = 64  # the batch sweep's largest batch: 1, 2, 4, ... 64
BATCH_STEPS = 8  # timed decode steps per batch size


def engine_decode_rate(lm, ids: list[int], new_tokens: int) -> float:
    """Engine decode tokens/s: tokens after the first ÷ their summed step times."""
    events = list(stream(lm, ids, max_new_tokens=new_tokens))
    assert len(events) == new_tokens, "prompt must not reach end of turn early"
    return (len(events) - 1) / sum(e.seconds for e in events[1:])


@torch.inference_mode()
def generate_decode_rate(lm, ids: list[int], new_tokens: int) -> float:
    """model.generate() decode tokens/s from an N-token run less a 1-token run (no prefill)."""
    x = torch.tensor([ids], device=lm.device)
    kw = dict(do_sample=False, pad_token_id=lm.tokenizer.eos_token_id)
    with stopwatch(lm.device) as one:
        lm.model.generate(x, max_new_tokens=1, min_new_tokens=1, **kw)
    with stopwatch(lm.device) as full:
        lm.model.generate(x, max_new_tokens=new_tokens, min_new_tokens=new_tokens, **kw)
    return (new_tokens - 1) / max(full[0] - one[0], 1e-9)


def decode(lm, ids: list[int], bandwidth_gbs: float, new_tokens: int = 32, repeats: int = 5
           ) -> dict:
    """Engine against `generate()` in alternating pairs (the ratio: the median of the pairs'),
    and the engine's share of the bandwidth ceiling (the weights and cache a step reads)."""
    engine_decode_rate(lm, ids, 4)  # warm-up
    generate_decode_rate(lm, ids, 4)
    eng, gen = [], []
    lanes = [(eng, engine_decode_rate), (gen, generate_decode_rate)]
    for i in range(repeats):  # interleaved, alternating which goes first
        for runs, rate in lanes[::-1] if i % 2 else lanes:
            runs.append(rate(lm, ids, new_tokens))
    info = lm.info
    kv_bytes = kv_cache_bytes(info.layers, info.kv_heads, info.head_dim, lm.bytes_per_value,
                              tokens=len(ids) + 24)
    roof = Roofline(bandwidth_gbs, bytes_read_per_token(lm.model) + kv_bytes, median(eng))
    return {"new_tokens": new_tokens, "engine_tokens_per_s": median(eng),
            "generate_tokens_per_s": median(gen),
            "engine_vs_generate": median([e / g for e, g in zip(eng, gen)]),
            "engine_runs": eng, "generate_runs": gen,
            "roofline_tokens_per_s": roof.ceiling_tokens_per_s,
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
    """Lesson 4's race: the same greedy tokens with the cache and by recomputing everything."""
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
    """Lesson 5's sweep: B copies of the prompt at B = 1, 2, 4, ... `max_batch`."""
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
    """Lesson 6's comparison of every mode against float32; each mode alone if that fails."""
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
    """GB/s copying a float32 buffer, read + write bytes counted (the roof uses reads only)."""
    src = torch.ones(megabytes * 1024 * 1024 // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)  # warm-up
    times = []
    for _ in range(repeats):
        with stopwatch(device) as t:
            dst.copy_(src)
        times.append(t[0])
    return 2 * src.numel() * src.element_size() / median(times) / 1e9


def measure_speculative(lm, settings, repeats: int = 3) -> dict:
    """Both drafts raced at the page's k; the verification pass timed at batch 16."""
    shared = SharedResults()
    ids = prompt_ids(lm.tokenizer, spec.spec_prompt(spec.DEFAULT_SPEC_PROMPT))
    k, new = int(settings.spec_k.default), int(settings.spec_new_tokens.default)
    out: dict = {"workload": spec.DEFAULT_SPEC_PROMPT, "k": k, "prompt_tokens": len(ids),
                 "threads": torch.get_num_threads(), "load_average_1min": os.getloadavg()[0]}
    for name, key in (("prompt_lookup", "prompt_lookup"), ("draft_model", settings.spec_draft)):
        draft = make_draft(lm, key, shared)
        runs = [spec.run_race(lm, ids, draft, k, new, shared) for _ in range(repeats)]
        speedups = [r.speedup for r in runs]
        mid = sorted(runs, key=lambda r: r.speedup)[len(runs) // 2]  # the median run's figures
        out[name] = {
            "acceptance": mid.acceptance, "tokens_per_pass": mid.tokens_per_pass,
            "tokens_per_s": mid.tokens_per_s, "plain_tokens_per_s": mid.plain_tokens_per_s,
            "speedup": median(speedups), "identical": all(r.identical for r in runs),
            "verdict": spec.speed_verdict(speedups, max(r.noise for r in runs)),
            "speedup_runs": speedups, "new_tokens": mid.new_tokens, "passes": mid.passes,
            "draft_seconds": mid.draft_seconds, "spec_seconds": mid.spec_seconds,
            "ceiling_tokens_per_s": mid.ceiling_tokens_per_s}
    out["draft_model"]["draft"] = settings.spec_draft
    *_, done = spec_expectation.batch_interplay(lm, ids, k, (1, 16), shared=shared)
    tpp = out["prompt_lookup"]["tokens_per_pass"]
    for c in done.points:
        out[f"batch{c.batch}"] = {
            "speedup": c.derived_speedup(tpp), "speedup_how": "derived: prompt lookup's "
            "batch-1 tokens per pass x plain step / verification pass, both timed at this batch",
            "plain_step_seconds": c.plain_seconds, "verify_seconds": c.verify_seconds,
            "cost_ratio": c.cost_ratio, "plain_bound": c.plain_bound,
            "verify_bound": c.verify_bound}
    out["load_average_1min_end"] = os.getloadavg()[0]
    return out


def _last(progress):
    record = None
    for record in progress:
        print(f"  context: {record.done}/{record.total}", flush=True)
    return record


def measure_context(lm, settings: Settings = LIMITS) -> dict:
    """Prefill and decode steps up to the model's window, with their theory; attention memory."""
    window = lm.info.context_window
    started = time.perf_counter()
    pre = _last(sweep.prefill_lengths_sweep(lm, sweep.prefill_lengths(settings, window),
                                            settings.context_prefill_repeats)).points
    curve = context_theory.fit_quadratic([p.tokens for p in pre], [p.seconds for p in pre])
    dec = _last(sweep.decode_lengths_sweep(lm, sweep.decode_lengths(settings, window),
                                           settings.context_decode_batches,
                                           settings.context_decode_repeats)).points
    theory = context_theory.decode_theory(lm)
    peaks = {p.implementation: p for p in
             compare_attention_memory(lm, window, settings.context_eager_max_tokens)}
    top = max(p.tokens for p in pre)

    def by_batch(value) -> dict:  # {"b1": {cache tokens: value(point)}, "b8": ...}
        return {f"b{b}": {p.cache_tokens: value(p) for p in
                          sorted(dec, key=lambda p: p.cache_tokens) if p.batch == b}
                for b in sorted({p.batch for p in dec})}
    steps = by_batch(lambda p: round(p.seconds * 1000, 2))
    spread = by_batch(lambda p: [round(p.seconds_min * 1000, 2), round(p.seconds_max * 1000, 2)])
    floor = by_batch(lambda p: round(theory.seconds(p.cache_tokens, p.batch) * 1000, 2))
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


if __name__ == "__main__":  # one section alone: python -m bench.measure context|speculative
    section = {"context": measure_context, "speculative": measure_speculative}[sys.argv[1]]
    print(json.dumps(section(load_model(), LIMITS), indent=1))
