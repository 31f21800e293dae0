"""`make bench`: every headline figure in one run (each lesson's, and the whole app's: start-up,
streaming, classes served against one row at a time and against vLLM); writes
bench/results.json and README's table.
"""
from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch

from bench import classroom, measure, paged, robust, serving_workloads, visitor_memory
from bench.app_server import RssWatch, start_app
from bench.clients import call, chat_fn_index
from bench.measure import KV_PROMPT, PROMPT, QUALITY_PROMPT
from bench.serving_workloads import Workload, app_stream, drive
from bench.targets import finish, table, write_readme
from inference.config import LIMITS
from inference.experiments import schedulers as sched
from inference.experiments.quiet_reference import this_cpu as cpu_name
from inference.experiments.roofline import measure_read_bandwidth, measure_step_bound, step_figures
from inference.loading import load_model
from inference.tokens import prompt_ids

TARGETS = {  # what a 2-core CPU must reach for the lessons' claims to hold
    "decode.engine_vs_generate": (">=", 0.95),
    "decode.fraction_of_roofline": (">=", 0.6),
    "kv_cache.speedup": (">=", 3),
    "batching.throughput_ratio_max_vs_1": (">=", 8),
    "quantization.int8.ratio_to_fp32": ("<=", 0.3),
    "quantization.int8.top1_agreement": (">=", 0.95),
    "startup.warm_seconds": ("<=", 10),
    "ui.client_vs_engine": (">=", 0.8),
    "serving.throughput_ratio_batched_vs_serial": (">=", 5),
    "serving.p95_latency_ratio_batched_vs_serial": ("<=", 0.33),
    "serving.batched.errors": ("<=", 0),
    "serving.peak_rss_vs_idle_batched": ("<=", 1.5),
    "serving.batched.p95_ttft_s": ("<=", 3.0),  # chunked prefill keeps first tokens prompt
    "context.tokens_max": (">=", 8000),  # the long-context sweep reaches the model's window
    "serving.paged.waste_paged_pct": ("<=", 5),  # paged KV wastes little, on the mixed workload
    "serving.paged.ttft_ratio_prefix_hit": ("<=", 0.3),
    "speculative.prompt_lookup.speedup": (">=", 1.5),  # the edit workload
    "speculative.prompt_lookup.tokens_per_pass": (">=", 1.5),
    "speculative.draft_model.speedup": (">=", 1.2),
    **classroom.TARGETS,  # a class pressing Run at once; chats while measuring
    **visitor_memory.TARGETS,  # visitors' memory comes back once they are gone
    **robust.TARGETS,  # headline figures under load, none impossible shown
    **serving_workloads.targets(),  # every shape of class served as well as vLLM serves it
}


def section(title: str, measure: Callable[[], Any]) -> Any:
    print(f"\n== {title} ({time.strftime('%H:%M:%S')})", flush=True)
    out = measure()
    print(json.dumps(out, indent=1, default=str), flush=True)
    return out


def machine_and_model(lm) -> tuple[dict, dict]:
    dev = lm.device
    return ({"device": lm.info.device if dev.type == "cuda" else f"cpu ({cpu_name()})",
             "dtype": lm.info.dtype, "threads": torch.get_num_threads(),
             "torch": torch.__version__,
             "bandwidth_read_gbs": measure_read_bandwidth(dev),
             "bandwidth_copy_gbs": measure.copy_bandwidth_gbs(dev),
             "bandwidth_method": "read: sum of a 512 MiB float32 buffer (bytes read / s); "
                                 "copy: 256 MB copy, read + write bytes counted"},
            {"name": lm.info.name, "source": lm.info.source, "parameters": lm.info.parameters,
             "weight_bytes": lm.info.weight_bytes})


def ui(lm, ids: list[int], n: int = 48) -> dict:
    """Decode tokens/s a streaming client sees through the app (updates after the first ÷
    their time) against the engine's own, measured before and after the client, averaged."""
    stamps: list[float] = []
    with start_app() as app:
        engine = measure.engine_decode_rate(lm, ids, n)
        call(app.url, chat_fn_index(app.url), [PROMPT, n], stamps=stamps)
        engine2 = measure.engine_decode_rate(lm, ids, n)
    if len(stamps) < 4:
        raise RuntimeError("the stream produced too few updates to time")
    # updates: "waiting for a row", the first token, then one per decoded token
    client = (len(stamps) - 2) / (stamps[-1] - stamps[1])
    eng = (engine + engine2) / 2
    return {"engine_tokens_per_s": eng, "client_tokens_per_s": client,
            "client_vs_engine": client / eng}


def startup_seconds() -> dict:
    """Cold: an empty weight cache (the GGUF is dequantized). Warm: the cache just written."""
    with tempfile.TemporaryDirectory() as cache:
        seconds = []
        for _ in ("cold", "warm"):
            server = start_app({"LLM_LAB_CACHE": cache})
            server.stop()
            seconds.append(server.ready_seconds)
    return {"cold_seconds": seconds[0], "warm_seconds": seconds[1]}


def serving_load(clients: int = 30, new_tokens: int = 48, rows: int | None = None) -> dict:
    """`clients` chats at once (the server held to `rows` rows if given), and the app's RSS."""
    env = {"LLM_LAB_SERVER_ROWS": str(rows)} if rows else {}
    with start_app(env) as app, RssWatch(app.pid) as watch:
        idle_mb = watch.now_mb()
        figures = asyncio.run(drive(Workload("class", clients, new_tokens), app_stream(app.url)))
        return figures | {"idle_rss_mb": idle_mb, "peak_rss_mb": watch.peak_mb()}


def serving_race(clients: int = 30, new_tokens: int = 48) -> dict:
    """The same class served by the continuous batcher, then one row at a time."""
    batched = serving_load(clients, new_tokens)
    serial = serving_load(clients, new_tokens, rows=1)
    return {"clients": clients, "new_tokens": new_tokens, "batched": batched, "serial": serial,
            "throughput_ratio_batched_vs_serial": batched["tokens_per_s"] / serial["tokens_per_s"],
            "p95_latency_ratio_batched_vs_serial": (batched["p95_latency_s"]
                                                    / serial["p95_latency_s"]),
            "peak_rss_vs_idle_batched": batched["peak_rss_mb"] / batched["idle_rss_mb"]}


def schedulers(lm) -> dict:
    """Lesson 5's static and continuous batchers on its default trace, at the page's defaults."""
    trace = sched.preset_trace(lm.tokenizer, sched.DEFAULT_PRESET)
    batch, wait = int(LIMITS.scheduler_batch.default), LIMITS.fill_wait_s.default
    res = {"trace": sched.DEFAULT_PRESET, "max_batch": batch, "static_fill_wait_s": wait}
    for name, events in (("static", sched.serve_static(lm, trace, batch, wait)),
                         ("continuous", sched.serve_continuous(lm, trace, batch))):
        *_, result = events  # the last event is the schedule's result
        s = result.summary
        res[name] = {"throughput_tokens_per_s": s.throughput, "mean_latency_s": s.mean_latency,
                     "p95_latency_s": s.p95_latency, "mean_ttft_s": s.mean_ttft,
                     "forward_passes": s.forward_passes, "wasted_row_steps": s.wasted_row_steps}
    res["continuous_vs_static_throughput"] = (res["continuous"]["throughput_tokens_per_s"]
                                              / res["static"]["throughput_tokens_per_s"])
    return res


def model_sections(results: dict) -> None:
    """Every section that needs the model loaded in this process (freed on return)."""
    lm = load_model()
    ids = prompt_ids(lm.tokenizer, PROMPT)
    results["machine"], results["model"] = section("machine", lambda: machine_and_model(lm))
    bandwidth = results["machine"]["bandwidth_read_gbs"]
    results["decode"] = section("decode: engine vs model.generate(), batch 1",
                                lambda: measure.decode(lm, ids, bandwidth))
    results["step_profile"] = section(
        "decode step profile: ops per step, share outside the big matmuls",
        lambda: step_figures(measure_step_bound(lm, ids, race_tokens=0)))
    results["prefill"] = section("prefill", lambda: measure.prefill_speeds(lm))
    results["kv_cache"] = section("KV cache: with vs without", lambda: measure.kv_cache_race(
        lm, prompt_ids(lm.tokenizer, KV_PROMPT)))
    results["batching"] = section("batching: static decode sweep, static vs continuous on the "
                                  "default trace", lambda: measure.batch_sweep(lm, ids)
                                  | {"schedulers": schedulers(lm)})
    results["quantization"] = section("quantization",
                                      lambda: measure.quantization(lm, QUALITY_PROMPT))
    results["startup"] = section("startup (cold: empty weight cache; warm: cache present)",
                                 startup_seconds)
    results["ui"] = section("ui: streaming client vs engine", lambda: ui(lm, ids))
    results["speculative"] = section(
        "speculative decoding: prompt lookup and an int4 draft against plain greedy decode",
        lambda: measure.measure_speculative(lm, LIMITS))
    chunked_figures = section(
        "chunked prefill: running streams' gaps while a long prompt arrives; step parts",
        lambda: paged.measure_chunked(lm, LIMITS))
    paged_figures = section(
        "paged KV cache: the server's pool, its waste against a padded tensor, prefix hits",
        lambda: paged.measure_paged(lm, LIMITS))
    results["context"] = section(
        "long contexts: prefill and decode to the model's window, eager vs sdpa memory",
        lambda: measure.measure_context(lm, LIMITS))
    results["robust"] = section(
        "robust: four headline figures quiet, beside a spinning core, beside 30 chats",
        lambda: robust.measure_robust(lm))
    results["serving"] = section(
        "serving: 30 streaming chat clients, continuous batcher vs one row at a time",
        serving_race)
    results["serving"].update(paged=paged_figures, chunked=chunked_figures["chunked"],
                              step_parts=chunked_figures["step_parts"])
    results["serving"].update(section(
        "serving: a class pressing every lesson's Run at once; chats beside a measurement",
        classroom.measure_classroom))
    results["serving"].update(section(
        "serving: what visitors leave in memory (2,000 fresh sessions, long attention views)",
        visitor_memory.measure_visitor_memory))


def main() -> dict:
    t0 = time.perf_counter()
    results: dict = {"when": time.strftime("%Y-%m-%d %H:%M:%S")}
    model_sections(results)  # then the model is freed: vLLM needs the memory and the cores
    workloads = section(
        "serving: four workloads, the app and vLLM (its own venv, same weights, same client)",
        lambda: serving_workloads.measure_workloads(log=print))
    record = serving_workloads.class_record(workloads)  # 30 x 48: serving.vllm, its ratios
    results["serving"].update(workloads=workloads, vllm=record["vllm"],
                              **{k: v for k, v in record.items() if k.startswith("app_vs_")})
    return finish(results, TARGETS, t0, "results.json")


if __name__ == "__main__":
    res = main()
    print(f"{table(res)}\n\ntotal bench time {res['bench_seconds']:.0f} s")
    wrote = write_readme(res)
    print("README.md's table rewritten" if wrote else "README.md has no bench-table markers")
