"""Whole-app figures: start-up time (cold and warm weight cache) and the tokens/s a
streaming client sees through the web server, compared with the engine alone."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(env_extra: dict, timeout: float = 300) -> tuple[subprocess.Popen, str, float]:
    """Start app.py on loopback; return (process, url, seconds until it answered HTTP 200)."""
    port = free_port()
    env = dict(os.environ, GRADIO_SERVER_NAME="127.0.0.1", GRADIO_SERVER_PORT=str(port),
               GRADIO_ANALYTICS_ENABLED="False", **env_extra)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "app.py")], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    while time.perf_counter() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"app.py exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return proc, url, time.perf_counter() - t0
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise TimeoutError("app.py did not answer in time")


def stop_app(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def startup_seconds() -> dict:
    """Cold: an empty weight cache (the GGUF is dequantized). Warm: the cache just written."""
    with tempfile.TemporaryDirectory() as cache:
        proc, _, cold = start_app({"LLM_LAB_CACHE": cache})
        stop_app(proc)
        proc, _, warm = start_app({"LLM_LAB_CACHE": cache})
        stop_app(proc)
    return {"cold_seconds": cold, "warm_seconds": warm}


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
