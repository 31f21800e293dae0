"""Whole-app figures: start-up time (cold and warm weight cache) and the tokens/s a
streaming client sees through the web server, compared with the engine alone.
The app is started by bench/app_server.py, as the end-to-end tests start it."""
from __future__ import annotations

import tempfile
import time

from bench.app_server import start_app


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
    if len(stamps) < 3:
        raise RuntimeError("the stream produced too few updates to time")
    return (len(stamps) - 1) / (stamps[-1] - stamps[0])
