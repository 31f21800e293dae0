"""`serving.chunked` and `serving.step_parts`: chunked prefill, and where a class step's time goes.

In process (no web stack), the real model, the server's own loop:
- `arrival_gaps`: a few streams are running when a ~2,000-token prompt arrives; the gaps
  between the running streams' tokens, from its arrival until its first token, with chunked
  prefill (`step_token_budget`) and without (budget 0: the whole prompt in one pass, every
  running stream waiting for it), one after the other in the same run;
- `step_parts`: the class workload (30 chat prompts × 48 greedy tokens, all at once); the
  mean seconds per part (forward pass, cache work, sampling + detokenizing, handing events
  to handlers, the loop's rest) of its 30-row decode-only steps, from the server's own
  `StepRecord`s.
`measure_chunked(lm, settings) -> dict` returns both.
"""
from __future__ import annotations

import threading
import time
from dataclasses import replace

from bench.paged import class_prompts, long_text
from inference.config import Settings
from inference.server import Server
from inference.stats import percentile
from inference.step_record import mean_parts
from inference.tokens import prompt_ids

RUNNING, RUNNING_TOKENS, LONG_TOKENS = 6, 96, 2_000


def arrival_gaps(lm, settings: Settings, budget: int) -> dict:
    """Running streams' token gaps while a ~2,000-token prompt is prefilled."""
    tok = lm.tokenizer
    srv = Server(lm, replace(settings, step_token_budget=budget,
                             server_steps_kept=1_000))
    times: list[list[float]] = [[] for _ in range(RUNNING)]
    try:
        runners = [srv.submit(p, None, RUNNING_TOKENS) for p in class_prompts(tok, RUNNING)]

        def read(i: int) -> None:
            for _ in runners[i].events():
                times[i].append(time.perf_counter())
        readers = [threading.Thread(target=read, args=(i,)) for i in range(RUNNING)]
        for r in readers:
            r.start()
        ready = threading.Event()
        while not all(len(t) >= 3 for t in times):  # every stream is decoding
            ready.wait(0.01)
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
        steps = [s for s in srv.stats().steps_detail if long_req.rid in s.chunk_rids]
    finally:
        srv.close()
    gaps = [b - a for t in times for a, b in zip(t, t[1:]) if b > arrived and a < first]
    return {"budget_tokens": budget, "prompt_tokens": len(ids), "ttft_s": first - arrived,
            "gaps": len(gaps), "p95_gap_s": percentile(gaps, 95),
            "max_gap_s": max(gaps, default=0.0), "prefill_steps": len(steps),
            "max_step_tokens": max((s.step_tokens for s in steps), default=0)}


def class_step_parts(lm, settings: Settings, clients: int = 30, new_tokens: int = 48) -> dict:
    """Mean seconds per part of the class workload's full decode-only steps."""
    srv = Server(lm, replace(settings, server_rows=max(settings.server_rows, clients),
                             server_steps_kept=10_000))
    try:
        with srv.turns.exclusive():  # everyone presses Generate at once
            reqs = [srv.submit(p, None, new_tokens) for p in class_prompts(lm.tokenizer, clients)]
        for r in reqs:
            list(r.events())
        steps = [s for s in srv.stats().steps_detail
                 if s.decode_tokens == clients and s.prefill_tokens == 0]
    finally:
        srv.close()
    parts = mean_parts(steps)
    total = parts["total_s"] or 1e-12
    return {"rows": clients, "steps": len(steps), **{k: round(v, 5) for k, v in parts.items()},
            "shares": {k: round(v / total, 3) for k, v in parts.items() if k != "total_s"}}


def measure_chunked(lm, settings: Settings) -> dict:
    """Both measurements in one run; `chunked` with the settings' budget (256 when it is 0)."""
    budget = settings.step_token_budget or 256
    on, off = arrival_gaps(lm, settings, budget), arrival_gaps(lm, settings, 0)
    return {"chunked": {"with": on, "without": off,
                        "p95_gap_ratio": on["p95_gap_s"] / max(off["p95_gap_s"], 1e-12)},
            "step_parts": class_step_parts(lm, settings)}


if __name__ == "__main__":
    import json
    import sys

    from inference.loading import load_model

    lm, s = load_model(), Settings.from_env()
    budgets = [int(b) for b in sys.argv[1:]]
    if budgets:  # compare budgets: python -m bench.chunked 128 256 512
        print(json.dumps([arrival_gaps(lm, s, b) for b in budgets + [0]], indent=1))
    else:
        print(json.dumps(measure_chunked(lm, s), indent=1))
