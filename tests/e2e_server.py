"""The real app, started as a separate process on a free loopback port, for end-to-end tests.

Browser, load and bad-input tests talk to the app exactly as visitors do: over HTTP to
`python app.py`, not by importing it. Starting it and waiting until it answers is
bench/app_server.py's `start_app()`, the same code the benchmark uses. One server is started
for the whole pytest session (the model takes a while to load on 2 cores) and shared through
`config.stash`, so every test module that asks for the `server` fixture (tests/conftest.py)
gets the same process; it is stopped when the session ends.
"""
from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from bench.app_server import ROOT, AppServer, start_app

ARTIFACTS = ROOT / "test-artifacts"
_SERVER_KEY = pytest.StashKey[AppServer]()


def shared_server(config: pytest.Config) -> AppServer:
    """The session's one app server: started on first use, stopped when pytest finishes."""
    server = config.stash.get(_SERVER_KEY, None)
    if server is None or not server.alive():
        server = start_app(log_dir=ARTIFACTS)
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


def call_raw(url: str, api: str, data: list, timeout_s: float = 60) -> tuple[str, object]:
    """POST to /gradio_api/call/<api> with ASCII-escaped JSON (so lone surrogates and NaN
    travel as the browser could send them); return (final event, its data)."""
    body = json.dumps({"data": data}, ensure_ascii=True)
    r = httpx.post(f"{url}gradio_api/call/{api}", content=body, timeout=timeout_s,
                   headers={"content-type": "application/json"})
    r.raise_for_status()
    event_id, event = r.json()["event_id"], None
    with httpx.stream("GET", f"{url}gradio_api/call/{api}/{event_id}", timeout=timeout_s) as s:
        for line in s.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event in ("complete", "error"):
                return event, json.loads(line[5:].strip())
    raise AssertionError(f"/{api}: the stream ended without a result")
