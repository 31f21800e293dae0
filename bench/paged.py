"""The server in process on the real model: its paged KV cache (`serving.paged`: throughput,
tokens against solo runs, padded vs paged bytes, prefix-cache hits) and chunked prefill
(`serving.chunked`, `serving.step_parts`). Compare budgets: `python -m bench.paged 128 256`.
"""
from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from contextlib import closing
from dataclasses import replace

from bench.serving_workloads import class_prompt
from inference.config import Settings
from inference.generation import stream
from inference.loading import load_model
from inference.sampling import SamplingSettings
from inference.server import Server
from inference.stats import percentile
from inference.step_clock import mean_parts
from inference.tokens import prompt_ids

RUNNING, RUNNING_TOKENS, LONG_TOKENS = 6, 96, 2_000  # streams running when a long prompt comes
STORY = ("The keeper of the northern lighthouse climbed its {n} steps every evening, wound the "
         "clockwork, trimmed the wick and watched the ships pass the reef in the failing light.")


def class_prompts(tok, clients: int = 30) -> list[list[int]]:
    return [prompt_ids(tok, class_prompt(i)) for i in range(clients)]


def long_text(tok, tokens: int, variant: int = 0) -> str:
    """About `tokens` tokens of plain text; `variant` changes its very first words."""
    parts, n = [f"Document {variant}."], 0
    while len(tok(" ".join(parts), add_special_tokens=False)["input_ids"]) < tokens:
        parts.append(STORY.format(n=100 + n))
        n += 1
    return " ".join(parts)


def serve_all(lm, settings: Settings, prompts: list[list[int]], new_tokens: int) -> dict:
    """Every prompt at once, each stream read on a thread, the stats polled for the peak pool."""
    got: list[list[int]] = [[] for _ in prompts]
    ttft: list[float] = [0.0] * len(prompts)
    done, peak = threading.Event(), {"pool": None, "cache_bytes": 0}

    def read(i: int, req, t0: float) -> None:
        for e in req.events():
            if not got[i]:
                ttft[i] = time.perf_counter() - t0
            got[i].append(e.token_id)

    def watch(srv: Server) -> None:
        while not done.wait(0.01):
            st = srv.stats()
            peak["cache_bytes"] = max(peak["cache_bytes"], st.cache_bytes)
            if st.pool and (peak["pool"] is None
                            or st.pool.paged_bytes > peak["pool"].paged_bytes):
                peak["pool"] = st.pool
    with closing(Server(lm, settings)) as srv:
        with srv.turns.exclusive():  # everyone presses Generate at once
            t0 = time.perf_counter()
            readers = [threading.Thread(target=read, args=(i, srv.submit(p, None, new_tokens),
                                                           t0)) for i, p in enumerate(prompts)]
        watcher = threading.Thread(target=watch, args=(srv,), daemon=True)
        watcher.start()
        for r in readers:
            r.start()
        for r in readers:
            r.join()
        wall = time.perf_counter() - t0
        done.set()
        watcher.join()
        final = srv.stats()
    return {"tokens": got, "wall_s": wall, "tokens_per_s": sum(map(len, got)) / wall,
            "ttft_s": ttft, "peak_pool": peak["pool"], "peak_cache_bytes": peak["cache_bytes"],
            "final_pool": final.pool}


def _solo(lm, ids: list[int], n: int) -> list[int]:
    return [e.token_id for e in stream(lm, ids, SamplingSettings(), n)]


def prefix_ttft(lm, settings: Settings, prefix_tokens: int = 1000, asks: int = 3,
                new_tokens: int = 8) -> dict:
    """TTFT of requests one at a time whose ~1,000-token prefix misses the cache, then hits it."""
    tok = lm.tokenizer
    questions = ["Who climbs the steps?", "What is trimmed?", "What passes the reef?"]
    miss, hit, checks = [], [], []
    with closing(Server(lm, settings)) as srv:
        def ask(ids: list[int]) -> tuple[float, list[int]]:
            t0 = time.perf_counter()
            events = srv.submit(ids, None, new_tokens).events()
            first = next(events)
            ttft = time.perf_counter() - t0
            return ttft, [first.token_id] + [e.token_id for e in events]

        for v in range(asks):  # distinct prefixes: nothing to hit but the chat template
            miss.append(ask(prompt_ids(tok, questions[v % 3],
                                       system=long_text(tok, prefix_tokens, 10 + v)))[0])
        shared = long_text(tok, prefix_tokens, 0)
        ask(prompt_ids(tok, "What is this about?", system=shared))  # caches the prefix
        before = srv.stats().pool.prefix_hit_tokens
        for v in range(asks):
            ids = prompt_ids(tok, questions[v % 3] + " Be brief.", system=shared)
            t, toks = ask(ids)
            hit.append(t)
            checks.append((ids, toks))
        hit_tokens = srv.stats().pool.prefix_hit_tokens - before
    identical = all(toks == _solo(lm, ids, new_tokens) for ids, toks in checks)
    p50_hit, p50_miss = statistics.median(hit), statistics.median(miss)
    return {"ttft_p50_prefix_hit_s": p50_hit, "ttft_p50_no_hit_s": p50_miss,
            "ttft_ratio_prefix_hit": p50_hit / p50_miss, "prefix_hit_tokens": hit_tokens,
            "prefix_tokens": len(prompt_ids(tok, "x", system=shared)), "identical": identical}


def measure_paged(lm, settings: Settings, clients: int = 30, new_tokens: int = 48,
                  solo_sample: int = 4, repeats: int = 2) -> dict:
    """`serving.paged`; the class is served `repeats` times, the best kept (noise only slows)."""
    tok = lm.tokenizer
    room = class_prompts(tok, clients)
    runs = [serve_all(lm, settings, room, new_tokens) for _ in range(max(1, repeats))]
    paged = max(runs, key=lambda r: r["tokens_per_s"])
    all_same = all(r["tokens"] == runs[0]["tokens"] for r in runs)
    sample = list(range(min(solo_sample, clients)))
    same_solo = all(paged["tokens"][i] == _solo(lm, room[i], new_tokens) for i in sample)
    mixed_prompts = [prompt_ids(tok, "Summarise this in one sentence: " + long_text(tok, 1000, i))
                     for i in range(3)] + class_prompts(tok, 12)  # 3 long among 12 short
    mixed = serve_all(lm, settings, mixed_prompts, 32)
    mixed_solo = mixed["tokens"][0] == _solo(lm, mixed_prompts[0], 32)  # a long one
    prefix = prefix_ttft(lm, settings)
    cls, mix = paged["peak_pool"], mixed["peak_pool"]
    return {
        "block_tokens": cls.block_tokens, "pool_blocks": cls.blocks_total,
        "peak_blocks_used": mix.blocks_used,
        "padded_bytes": mix.padded_bytes, "paged_bytes": mix.paged_bytes,
        "waste_padded_pct": mix.waste_padded_pct, "waste_paged_pct": mix.waste_paged_pct,
        **{k: prefix[k] for k in ("prefix_hit_tokens", "ttft_p50_prefix_hit_s",
                                  "ttft_p50_no_hit_s", "ttft_ratio_prefix_hit")},
        "identical_tokens": all_same and same_solo and mixed_solo and prefix["identical"],
        "class": {"clients": clients, "new_tokens": new_tokens,
                  "paged_tokens_per_s": paged["tokens_per_s"],
                  "paged_ttft_p50_s": statistics.median(paged["ttft_s"]),
                  "peak_blocks_used": cls.blocks_used,
                  "waste_padded_pct": cls.waste_padded_pct,
                  "waste_paged_pct": cls.waste_paged_pct,
                  "prefix_hit_tokens": paged["final_pool"].prefix_hit_tokens,
                  "paged_server_peak_cache_bytes": paged["peak_cache_bytes"],
                  "solo_checked": len(sample), "repeats": len(runs),
                  "paged_runs_tokens_per_s": [r["tokens_per_s"] for r in runs]},
        "mixed": {"prompts": [len(p) for p in mixed_prompts], "new_tokens": 32,
                  "paged_tokens_per_s": mixed["tokens_per_s"]},
        "prefix": {"prefix_tokens": prefix["prefix_tokens"]},
    }


def arrival_gaps(lm, settings: Settings, budget: int) -> dict:
    tok = lm.tokenizer
    times: list[list[float]] = [[] for _ in range(RUNNING)]
    with closing(Server(lm, replace(settings, step_token_budget=budget,
                                    server_steps_kept=1_000))) as srv:
        runners = [srv.submit(p, None, RUNNING_TOKENS) for p in class_prompts(tok, RUNNING)]

        def read(i: int) -> None:
            for _ in runners[i].events():
                times[i].append(time.perf_counter())
        readers = [threading.Thread(target=read, args=(i,)) for i in range(RUNNING)]
        for r in readers:
            r.start()
        while not all(len(t) >= 3 for t in times):  # every stream is decoding
            time.sleep(0.01)
        ids = prompt_ids(tok, "Summarise this in one sentence: " + long_text(tok, LONG_TOKENS))
        arrived = time.perf_counter()
        long_req = srv.submit(ids, None, 4)
        events = long_req.events()
        next(events)
        first = time.perf_counter()
        list(events)
        for r in runners:
            r.cancel()
        for r in readers:
            r.join()
        steps = [s for s in srv.stats().steps_detail if long_req.rid in dict(s.plan.chunks)]
    gaps = [b - a for t in times for a, b in zip(t, t[1:]) if b > arrived and a < first]
    return {"budget_tokens": budget, "prompt_tokens": len(ids), "ttft_s": first - arrived,
            "gaps": len(gaps), "p95_gap_s": percentile(gaps, 95),
            "max_gap_s": max(gaps, default=0.0), "prefill_steps": len(steps),
            "max_step_tokens": max((s.plan.tokens for s in steps), default=0)}


def class_step_parts(lm, settings: Settings, clients: int = 30, new_tokens: int = 48) -> dict:
    with closing(Server(lm, replace(settings, server_rows=max(settings.server_rows, clients),
                                    server_steps_kept=10_000))) as srv:
        with srv.turns.exclusive():  # everyone presses Generate at once
            reqs = [srv.submit(p, None, new_tokens) for p in class_prompts(lm.tokenizer, clients)]
        for r in reqs:
            list(r.events())
        steps = [s for s in srv.stats().steps_detail
                 if len(s.plan.decode) == clients and not s.plan.chunks]
    parts = mean_parts(steps)
    total = parts["total_s"] or 1e-12
    return {"rows": clients, "steps": len(steps), **{k: round(v, 5) for k, v in parts.items()},
            "shares": {k: round(v / total, 3) for k, v in parts.items() if k != "total_s"}}


def measure_chunked(lm, settings: Settings) -> dict:
    """`chunked` with the settings' budget (256 when it is 0), and `step_parts`."""
    budget = settings.step_token_budget or 256
    on, off = arrival_gaps(lm, settings, budget), arrival_gaps(lm, settings, 0)
    return {"chunked": {"with": on, "without": off,
                        "p95_gap_ratio": on["p95_gap_s"] / max(off["p95_gap_s"], 1e-12)},
            "step_parts": class_step_parts(lm, settings)}


if __name__ == "__main__":
    lm, s = load_model(), Settings.from_env()
    budgets = [int(b) for b in sys.argv[1:]]  # compare budgets: python -m bench.paged 128 256
    gaps = [arrival_gaps(lm, s, b) for b in budgets + [0]] if budgets else measure_chunked(lm, s)
    print(json.dumps(gaps, indent=1))
