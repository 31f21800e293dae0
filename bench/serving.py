"""Whole-app figures: start-up time (cold and warm weight cache), the tokens/s a streaming
client sees through the web server compared with the engine alone, and a classroom of
streaming chat clients served with and without the continuous batcher (the serving workloads'
driver and client, `bench.serving_workloads.drive`).
The app is started by bench/app_server.py, as the end-to-end tests start it."""
from __future__ import annotations

import asyncio
import tempfile
import time

from bench.app_server import RssWatch, start_app
from bench.serving_workloads import Workload, app_stream, drive


def startup_seconds() -> dict:
    """Cold: an empty weight cache (the GGUF is dequantized). Warm: the cache just written."""
    with tempfile.TemporaryDirectory() as cache:
        seconds = []
        for _ in ("cold", "warm"):
            server = start_app({"LLM_LAB_CACHE": cache})
            server.stop()
            seconds.append(server.ready_seconds)
    return {"cold_seconds": seconds[0], "warm_seconds": seconds[1]}


def client_stream_rate(url: str, prompt: str, new_tokens: int, api_name: str) -> float:
    """Decode tokens/s as a streaming client sees it: updates after the first ÷ their time."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    job = client.submit(prompt, new_tokens, api_name=api_name)
    stamps = []
    for _ in job:
        stamps.append(time.perf_counter())
    if len(stamps) < 4:
        raise RuntimeError("the stream produced too few updates to time")
    # updates: "waiting for a row", the first token, then one per decoded token
    return (len(stamps) - 2) / (stamps[-1] - stamps[1])


def serving_load(clients: int = 30, new_tokens: int = 48, rows: int | None = None) -> dict:
    """Start the app (its server limited to `rows` active rows if given), let `clients`
    streaming chat clients ask at once (distinct prompts), and report latency, TTFT,
    throughput, errors and the app's peak resident memory against its idle memory."""
    env = {"LLM_LAB_SERVER_ROWS": str(rows)} if rows else {}
    with start_app(env) as app, RssWatch(app.pid) as watch:
        idle_mb = watch.now_mb()
        figures = asyncio.run(drive(Workload("class", clients, new_tokens), app_stream(app.url)))
        return figures | {"idle_rss_mb": idle_mb, "peak_rss_mb": watch.peak_mb()}


def serving_race(clients: int = 30, new_tokens: int = 48) -> dict:
    """The same classroom served twice in one run: by the continuous batcher, and with it
    limited to one active row (every request alone, one after another)."""
    batched = serving_load(clients, new_tokens)
    serial = serving_load(clients, new_tokens, rows=1)
    return {"clients": clients, "new_tokens": new_tokens, "batched": batched, "serial": serial,
            "throughput_ratio_batched_vs_serial": batched["tokens_per_s"] / serial["tokens_per_s"],
            "p95_latency_ratio_batched_vs_serial": (batched["p95_latency_s"]
                                                    / serial["p95_latency_s"]),
            "peak_rss_vs_idle_batched": batched["peak_rss_mb"] / batched["idle_rss_mb"]}
