"""The real app, started as a separate process on a free loopback port, for end-to-end tests.

Browser, load and bad-input tests talk to the app exactly as visitors do: over HTTP to
`python app.py`, not by importing it. One server is started for the whole pytest session
(the model takes a while to load on 2 cores) and shared through `config.stash`, so every test
module that asks for it gets the same process; it is stopped when the session ends.

    @pytest.fixture(scope="session")
    def server(request):
        return shared_server(request.config)
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
STARTUP_TIMEOUT_S = 300  # model load (~20-60 s on 2 busy cores), with a generous margin
_SERVER_KEY = pytest.StashKey["AppServer"]()


def free_port() -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class AppServer:
    """A running `app.py` child process and how to reach it."""

    process: subprocess.Popen
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def answers(self) -> bool:
        """True when the app serves its config (the page and API are ready)."""
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


def start_server(extra_env: dict[str, str] | None = None) -> AppServer:
    """Start `python app.py` on a free loopback port and wait until it answers."""
    ARTIFACTS.mkdir(exist_ok=True)
    port = free_port()
    env = dict(os.environ, GRADIO_SERVER_PORT=str(port), GRADIO_SERVER_NAME="127.0.0.1",
               GRADIO_ANALYTICS_ENABLED="False", PYTHONUNBUFFERED="1",
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    env.update(extra_env or {})
    log_path = ARTIFACTS / f"server-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
    server = AppServer(proc, port, log_path)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if not server.alive():
            raise RuntimeError(f"app.py exited with {proc.returncode}:\n{server.log_tail()}")
        if server.answers():
            return server
        time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"app.py did not answer within {STARTUP_TIMEOUT_S} s:\n{server.log_tail()}")


def shared_server(config: pytest.Config) -> AppServer:
    """The session's one app server: started on first use, stopped when pytest finishes."""
    server = config.stash.get(_SERVER_KEY, None)
    if server is None or not server.alive():
        server = start_server()
        config.stash[_SERVER_KEY] = server
        config.add_cleanup(server.stop)
    return server


def server_rss_bytes(pid: int) -> int:
    """Resident memory of the server process right now (psutil)."""
    import psutil

    return psutil.Process(pid).memory_info().rss


def server_peak_rss_bytes(pid: int) -> int | None:
    """The kernel's high-water mark of resident memory (Linux VmHWM), if available."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None
