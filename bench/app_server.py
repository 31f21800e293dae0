"""Servers as child processes on free loopback ports, and their memory watched: the app
(`start_app`, for the bench and end-to-end tests) and vLLM (`vllm_peer`). A start returns once
the server answers (polled) and records how long that took (`ready_seconds`).
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT_S = 300.0  # model load (~20-60 s on 2 busy cores), with a generous margin
POLL_S = 0.1  # how often readiness is asked while the app starts
SAMPLE_S = 0.2  # how often `RssWatch` reads a process's memory


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class AppServer:
    process: subprocess.Popen
    port: int
    log_path: Path
    ready_seconds: float | None = None  # from process start to the first answer

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def answers(self, path: str = "config") -> bool:
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def __enter__(self) -> AppServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


def launch(name: str, cmd: list[str], env: dict[str, str], port: int, log_path: Path,
           ready_path: str = "config", timeout_s: float = STARTUP_TIMEOUT_S,
           poll_s: float = POLL_S) -> AppServer:
    """Start `cmd` and return once `ready_path` answers (RuntimeError with the log's end)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    server = AppServer(proc, port, log_path)
    while time.perf_counter() - started < timeout_s:
        if not server.alive():
            raise RuntimeError(f"{name} exited with {proc.returncode}:\n{server.log_tail()}")
        if server.answers(ready_path):
            server.ready_seconds = time.perf_counter() - started
            return server
        time.sleep(poll_s)  # a child's readiness: there is no event to wait on
    server.stop()
    raise RuntimeError(f"{name} did not answer within {timeout_s:.0f} s:\n{server.log_tail()}")


def start_app(extra_env: dict[str, str] | None = None, log_dir: Path | None = None) -> AppServer:
    """`python app.py` on a free port, logging to `<log_dir or temp>/server-<port>.log`."""
    port = free_port()
    env = dict(os.environ, GRADIO_SERVER_PORT=str(port), GRADIO_SERVER_NAME="127.0.0.1",
               GRADIO_ANALYTICS_ENABLED="False", PYTHONUNBUFFERED="1",
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    env.update(extra_env or {})
    return launch("app.py", [sys.executable, str(ROOT / "app.py")], env, port,
                  Path(log_dir or tempfile.gettempdir()) / f"server-{port}.log")


class RssWatch:
    """A process's RSS in MB, sampled into `samples` [(monotonic t, MB)] during the block."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-watch", daemon=True)

    def now_mb(self) -> float:
        return self.process.memory_info().rss / 2**20

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), self.now_mb()))
            self._stop.wait(SAMPLE_S)

    def __enter__(self) -> RssWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def peak_mb(self, since: float = 0.0) -> float:
        return max(mb for t, mb in self.samples if t >= since)
