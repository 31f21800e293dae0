"""The real app, `python app.py`, started as its own process on a free loopback port.

One implementation for everything that needs the app running as visitors reach it: the
benchmark (start-up time, the tokens/s a streaming client sees) and the end-to-end tests
(browser, load, bad input; see tests/e2e_server.py). `start_app()` returns once the app
serves its config, polling for it (no fixed sleep), and says how long that took.

    server = start_app({"LLM_LAB_CACHE": folder})
    try:
        print(server.url, server.ready_seconds)
    finally:
        server.stop()
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT_S = 300.0  # model load (~20-60 s on 2 busy cores), with a generous margin
POLL_S = 0.1  # how often readiness is asked while the app starts


def free_port() -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class AppServer:
    """A running `app.py` child process, how to reach it and how long it took to answer."""

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

    def answers(self) -> bool:
        """True when the app serves its config (the page and the API are ready)."""
        try:
            with urllib.request.urlopen(self.url + "config", timeout=5) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)


def app_env(port: int, extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """The app's environment: loopback on `port`, no analytics, no proxy for loopback."""
    env = dict(os.environ, GRADIO_SERVER_PORT=str(port), GRADIO_SERVER_NAME="127.0.0.1",
               GRADIO_ANALYTICS_ENABLED="False", PYTHONUNBUFFERED="1",
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    env.update(extra_env or {})
    return env


def start_app(extra_env: dict[str, str] | None = None, log_dir: Path | None = None,
              timeout_s: float = STARTUP_TIMEOUT_S) -> AppServer:
    """Start `python app.py` on a free loopback port; return once it answers HTTP.

    Its output goes to `<log_dir>/server-<port>.log` (the system's temp folder by default).
    Raises RuntimeError, with the end of that log, if the app exits or stays silent."""
    port = free_port()
    log_dir = Path(log_dir or tempfile.gettempdir())
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"server-{port}.log"
    started = time.perf_counter()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, str(ROOT / "app.py")], cwd=ROOT,
                                env=app_env(port, extra_env), stdout=log,
                                stderr=subprocess.STDOUT)
    server = AppServer(proc, port, log_path)
    while time.perf_counter() - started < timeout_s:
        if not server.alive():
            raise RuntimeError(f"app.py exited with {proc.returncode}:\n{server.log_tail()}")
        if server.answers():
            server.ready_seconds = time.perf_counter() - started
            return server
        time.sleep(POLL_S)
    server.stop()
    raise RuntimeError(f"app.py did not answer within {timeout_s:.0f} s:\n{server.log_tail()}")
