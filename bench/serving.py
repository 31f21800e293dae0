"""Whole-app figures: start-up time (cold and warm weight cache), the tokens/s a streaming
client sees through the web server compared with the engine alone, and a classroom of
streaming chat clients served with and without the continuous batcher.
The app is started by bench/app_server.py, as the end-to-end tests start it."""
from __future__ import annotations

import math
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import psutil

from bench.app_server import start_app
from bench.gradio_stream import chat_fn_index, timed_app_chat
from inference.stats import percentile


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


TOPICS = ["the sea", "volcanoes", "bread", "owls", "trains", "winter", "bees", "comets",
          "rivers", "chess", "tea", "deserts", "glaciers", "bicycles", "lighthouses"]


def class_prompt(i: int) -> str:
    """Student i's question: the same 30 prompts for the app and for every peer."""
    return f"Write about {TOPICS[i % len(TOPICS)]} in {3 + i % 4} sentences (#{i})."


def app_chat(url: str, fn_index: int, new_tokens: int) -> Callable[[int, threading.Barrier], dict]:
    """Student i's streaming chat with the app, for `class_load`: connected (the endpoint's
    number read from the app's config) before everyone presses Generate at once, then timed
    by the same light client as vLLM's (`bench.gradio_stream`): latency, TTFT as the client
    sees it (from pressing Generate to the first answer text, queue included), tokens."""
    def one_chat(i: int, start: threading.Barrier) -> dict:
        start.wait()
        return timed_app_chat(url, fn_index, class_prompt(i), new_tokens)
    return one_chat


def class_load(one_chat: Callable[[int, threading.Barrier], dict], clients: int,
               pid: int | None = None) -> dict:
    """`clients` chats at once, each `one_chat(i, barrier)` (it waits on the barrier, then
    sends student i's prompt and returns its timings): latency, TTFT, throughput and errors,
    and, with `pid`, that server's peak resident memory against its idle memory. The same
    driver serves the app and every peer (vLLM), so their figures compare like for like."""
    proc = psutil.Process(pid) if pid else None
    idle = proc.memory_info().rss if proc else 0
    peak, stop = [idle], threading.Event()

    def sample() -> None:
        while proc and not stop.wait(0.2):
            peak[0] = max(peak[0], proc.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    barrier = threading.Barrier(clients)
    try:
        with ThreadPoolExecutor(max_workers=clients) as pool:
            runs = list(pool.map(lambda i: one_chat(i, barrier), range(clients)))
    finally:
        stop.set()
        sampler.join()
    return class_figures(runs) | ({"idle_rss_mb": idle / 1e6, "peak_rss_mb": peak[0] / 1e6}
                                  if proc else {})


def class_figures(runs: list[dict]) -> dict:
    """Latency and TTFT percentiles (one nearest-rank rule, as the workloads'), tokens/s over
    the class's wall time, errors."""
    ok = [r for r in runs if r["ok"]]
    # From the moment the class pressed Generate to the last answer's last token (building 30
    # clients beforehand is not serving time: it once made up a quarter of the batched wall).
    timed = [r for r in runs if "start" in r]
    wall = (max(r["end"] for r in timed) - min(r["start"] for r in timed)) if timed else math.nan
    lat = [r["latency_s"] for r in ok]
    ttft = [r["ttft_s"] for r in ok if r["ttft_s"] is not None]
    return {"p50_latency_s": percentile(lat, 50) if lat else None,
            "p95_latency_s": percentile(lat, 95) if lat else None,
            "p50_ttft_s": percentile(ttft, 50) if ttft else None,
            "p95_ttft_s": percentile(ttft, 95) if ttft else None,
            "tokens_per_s": sum(r["tokens"] for r in ok) / wall if ok else 0.0, "wall_s": wall,
            "errors": len(runs) - len(ok),
            "error_messages": [r["error"] for r in runs if "error" in r][:5]}


def serving_load(clients: int = 30, new_tokens: int = 48, rows: int | None = None) -> dict:
    """Start the app (its server limited to `rows` active rows if given), let `clients`
    streaming chat clients ask at once (distinct prompts), and report latency, TTFT,
    throughput, errors and the app's peak resident memory against its idle memory."""
    env = {"LLM_LAB_SERVER_ROWS": str(rows)} if rows else {}
    app = start_app(env)
    try:
        return class_load(app_chat(app.url, chat_fn_index(app.url), new_tokens), clients,
                          app.pid)
    finally:
        app.stop()


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
