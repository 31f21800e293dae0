"""Four shapes of class (`WORKLOADS`: at once, after a shared handout, seeded Poisson arrivals
as vLLM's `benchmark_serving`), served by the app and by vLLM in one run, timed by one client;
the app ÷ vLLM ratios are the targets. Run alone: `make bench-serving`.
"""
from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from bench import app_server
from bench.clients import app_tokens, chat_fn_index, chat_tokens
from bench.targets import run_alone
from inference.experiments.quiet_reference import this_cpu
from inference.stats import percentile

StreamOne = Callable[[str, int], AsyncIterator[int]]  # (prompt, new tokens) -> tokens so far
REQUEST_TIMEOUT_S = 600.0  # one request's limit: past it, it counts as an error
TOPICS = ["the sea", "volcanoes", "bread", "owls", "trains", "winter", "bees", "comets",
          "rivers", "chess", "tea", "deserts", "glaciers", "bicycles", "lighthouses"]


def class_prompt(i: int) -> str:
    return f"Write about {TOPICS[i % len(TOPICS)]} in {3 + i % 4} sentences (#{i})."


PREAMBLE = " ".join((Path(__file__).parent / "class_handout.txt").read_text().split())


@dataclass(frozen=True)
class Workload:
    """One shape of class: who asks, when, and for how many tokens."""

    name: str  # the results key: serving.workloads.<name>
    requests: int  # students at once (arrivals: ignored, the schedule decides)
    new_tokens: int  # tokens each asks for
    preamble: str = ""  # text before every question (shared by all)
    per_s: float = 0.0  # Poisson arrivals a second (0: everyone at the same moment)
    seconds: float = 0.0  # arrivals come for this long
    seed: int = 0  # the arrival schedule's seed

    def prompt(self, i: int) -> str:
        return f"{self.preamble}\n\n{class_prompt(i)}" if self.preamble else class_prompt(i)

    def offsets(self) -> list[float]:
        if self.per_s:
            return arrival_offsets(self.per_s, self.seconds, self.seed)
        return [0.0] * self.requests


WORKLOADS = (Workload("class_30x48", 30, 48), Workload("class_60x128", 60, 128),
             Workload("preamble_30x64", 30, 64, preamble=PREAMBLE),
             Workload("arrivals_2_per_s", 0, 128, per_s=2.0, seconds=60.0, seed=8))


def arrival_offsets(per_s: float, seconds: float, seed: int) -> list[float]:
    """A Poisson process's arrival times in [0, `seconds`): exponential gaps of mean 1/`per_s`
    from `random.Random(seed)` (the same seed, the same schedule).

    >>> [round(t, 2) for t in arrival_offsets(2.0, 3.0, seed=1)]
    [0.07, 1.01, 1.73, 1.88, 2.22, 2.52]
    """
    rng, out = random.Random(seed), []
    t = rng.expovariate(per_s)
    while t < seconds:
        out.append(t)
        t += rng.expovariate(per_s)
    return out


def workload_figures(runs: list[dict]) -> dict:
    """Tokens/s over the wall time; percentiles of the requests that succeeded; errors."""
    ok = [r for r in runs if r["ok"]]
    wall = max(r["end"] for r in runs) - min(r["start"] for r in runs) if runs else 0.0

    def pct(key: str, q: float) -> float | None:
        values = [r[key] for r in ok if r[key] is not None]
        return percentile(values, q) if values else None

    return {"requests": len(runs), "errors": len(runs) - len(ok), "wall_s": wall,
            "tokens_per_s": sum(r["tokens"] for r in ok) / wall if ok and wall > 0 else 0.0,
            "p50_latency_s": pct("latency_s", 50), "p95_latency_s": pct("latency_s", 95),
            "p50_ttft_s": pct("ttft_s", 50), "p95_ttft_s": pct("ttft_s", 95),
            "p95_tpot_s": pct("tpot_s", 95),
            "error_messages": [r["error"] for r in runs if not r["ok"]][:5]}


async def drive(workload: Workload, stream_one: StreamOne,
                clock: Callable[[], float] = time.perf_counter,
                sleep: Callable[[float], Awaitable] = asyncio.sleep,
                timeout_s: float = REQUEST_TIMEOUT_S) -> dict:
    """Send the workload's requests at their offsets through `stream_one`, timed by `clock`."""
    t0 = clock()

    async def one(i: int, at: float) -> dict:
        if (wait := t0 + at - clock()) > 0:
            await sleep(wait)
        start, first, tokens = clock(), None, 0
        try:
            async with asyncio.timeout(timeout_s):
                async for tokens in stream_one(workload.prompt(i), workload.new_tokens):
                    if first is None and tokens > 0:
                        first = clock()
        except Exception as exc:  # counted, with its message: one failure never ends the run
            return {"ok": False, "start": start, "end": clock(),
                    "error": f"{type(exc).__name__}: {exc}"[:300]}
        if first is None:
            return {"ok": False, "start": start, "end": clock(), "error": "no tokens"}
        end = clock()
        return {"ok": True, "start": start, "end": end, "tokens": tokens,
                "latency_s": end - start, "ttft_s": first - start,
                "tpot_s": (end - first) / (tokens - 1) if tokens > 1 else None}

    runs = await asyncio.gather(*(one(i, at) for i, at in enumerate(workload.offsets())))
    return workload_figures(list(runs))


async def serve_all(stream_one: StreamOne, workloads=WORKLOADS, log=print) -> dict:
    """Every workload in turn, after an untimed warm-up request (its failure only logged)."""
    warm = await drive(Workload("warm-up", 1, 8), stream_one)
    if warm["errors"]:
        log(f"  warm-up failed: {warm['error_messages'][0]}", flush=True)
    out = {}
    for w in workloads:
        f = out[w.name] = await drive(w, stream_one)
        p95 = "none" if f["p95_latency_s"] is None else f"{f['p95_latency_s']:.1f} s"
        log(f"  {w.name}: {f['requests']} requests, {f['tokens_per_s']:.1f} tokens/s, "
            f"p95 latency {p95}, errors {f['errors']}", flush=True)
    return out


def ratios(app: dict, vllm: dict | None) -> dict:
    """app ÷ vLLM: throughput (≥ 1: the app is faster), p95 latency and p95 TTFT (≤ 1: its
    slowest students wait less); None where either side has no figure.

    >>> ratios({"tokens_per_s": 30, "p95_latency_s": 4, "p95_ttft_s": 1},
    ...        {"tokens_per_s": 20, "p95_latency_s": 8, "p95_ttft_s": None})
    {'app_vs_vllm_throughput': 1.5, 'app_vs_vllm_p95_latency': 0.5, 'app_vs_vllm_p95_ttft': None}
    """
    def ratio(key: str) -> float | None:
        a, v = app.get(key), (vllm or {}).get(key)
        return a / v if a is not None and v else None

    keys = {"throughput": "tokens_per_s", "p95_latency": "p95_latency_s", "p95_ttft": "p95_ttft_s"}
    return {f"app_vs_vllm_{name}": ratio(key) for name, key in keys.items()}


def app_stream(url: str) -> StreamOne:
    fn = chat_fn_index(url)
    return lambda prompt, new_tokens: app_tokens(url, fn, prompt, new_tokens)


def app_side(workloads=WORKLOADS, log=print) -> dict:
    with app_server.start_app() as app:
        return asyncio.run(serve_all(app_stream(app.url), workloads, log))


def vllm_side(workloads=WORKLOADS, log=print) -> tuple[dict | None, str | None]:
    """The workloads served by vLLM -> (figures, None), or (None, why not)."""
    server, said = app_server.start_peer(log)  # said: the model it serves, or why it did not start
    if server is None:
        return None, said
    try:
        return asyncio.run(serve_all(lambda p, n: chat_tokens(server.url, said, p, n),
                                     workloads, log)), None
    except Exception as exc:  # the app's figures still stand; the comparison says why not
        return None, f"{type(exc).__name__}: {exc}"[:400]
    finally:
        server.stop()


def measure_workloads(workloads=WORKLOADS, log=print) -> dict:
    """Per workload the app's figures, vLLM's (None and `vllm_reason` without it), the ratios."""
    log("== serving workloads: the app", flush=True)
    app = app_side(workloads, log)
    log("== serving workloads: vLLM", flush=True)
    vllm, reason = vllm_side(workloads, log)
    out = {}
    for w in workloads:
        peer = vllm[w.name] if vllm else None
        out[w.name] = {"app": app[w.name], "vllm": peer, **ratios(app[w.name], peer)}
        if reason:
            out[w.name]["vllm_reason"] = reason
    return out


def targets(workloads=WORKLOADS) -> dict[str, tuple[str, float]]:
    """Every workload's targets: as fast as vLLM, its slowest waits no longer, no errors."""
    out = {}
    for w in workloads:
        key = f"serving.workloads.{w.name}"
        out |= {f"{key}.app_vs_vllm_throughput": (">=", 1.0),
                f"{key}.app_vs_vllm_p95_latency": ("<=", 1.0),
                f"{key}.app_vs_vllm_p95_ttft": ("<=", 1.0),
                f"{key}.app.errors": ("<=", 0), f"{key}.vllm.errors": ("<=", 0)}
    return out


def class_record(workloads: dict) -> dict:
    """The 30 x 48 workload under the keys the serving-peer card and `make bench` read."""
    w = workloads["class_30x48"]
    vllm = (w["vllm"] | {"version": app_server.VLLM_VERSION} if w["vllm"]
            else {"skipped": w.get("vllm_reason", "no figures")})
    return {"clients": 30, "new_tokens": 48, "batched": w["app"], "vllm": vllm,
            **{k: v for k, v in w.items() if k.startswith("app_vs_vllm_") and v is not None}}


def main() -> dict:
    """`make bench-serving` (both servers share the cores: run it with nothing else busy)."""
    def serving() -> dict:
        workloads = measure_workloads(log=print)
        return {"workloads": workloads, **class_record(workloads)}
    return run_alone("serving-results.json", targets(), serving, machine=this_cpu(),
                     cores=os.cpu_count())


if __name__ == "__main__":
    main()
