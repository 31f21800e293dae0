"""A classroom at once: 30 visitors ask for a short answer while 3 others run heavy sweeps.

Bounded in count and time, loopback only. Every request must either complete or get a clear
"busy, try again" message (the queue is full); none may fail otherwise or hang. The test
prints p50/p95 latency of the short requests and the server's peak resident memory, and
writes them to test-artifacts/load.json.
"""
from __future__ import annotations

import json
import re
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from gradio_client import Client

from bench.app_server import RssWatch
from e2e_server import ARTIFACTS, server_peak_rss_bytes, server_rss_bytes
from inference.stats import percentile

SHORT_CLIENTS = 30
SHORT_NEW_TOKENS = 6
HEAVY_SWEEPS = [([8, 32, 128], 32), ([1, 8, 32], 16), ([8, 32, 128], 32)]  # last: shared result
REQUEST_TIMEOUT_S = 150  # a request still unanswered after this counts as hung
BUSY = re.compile(r"queue is full|busy|try again", re.IGNORECASE)


def outcome(call) -> tuple[str, float, str]:
    """('ok' | 'busy' | 'error', seconds, message) for one request."""
    started = time.monotonic()
    try:
        call()
        return "ok", time.monotonic() - started, ""
    except Exception as exc:  # classify every failure: busy is fine, anything else is not
        kind = "busy" if BUSY.search(str(exc)) else "error"
        return kind, time.monotonic() - started, f"{type(exc).__name__}: {exc}"


def short_request(client: Client, i: int) -> tuple[str, float, str]:
    def call():
        history, stats = client.submit(f"Give me one word that rhymes with cat ({i}).",
                                       SHORT_NEW_TOKENS, api_name="/chat"
                                       ).result(timeout=REQUEST_TIMEOUT_S)
        assert "tokens generated" in stats, stats
    return outcome(call)


def heavy_request(client: Client, lengths: list[int], max_seq: int) -> tuple[str, float, str]:
    def call():
        chart, progress = client.submit(lengths, max_seq, None, api_name="/prefill_sweep"
                                        ).result(timeout=REQUEST_TIMEOUT_S)
        assert "Done." in progress or "shared result" in progress, progress
    return outcome(call)


def test_a_classroom_at_once(server):
    n_total = SHORT_CLIENTS + len(HEAVY_SWEEPS)
    # Visitors arrive over a few seconds (4 at a time), then all press their button at once.
    with ThreadPoolExecutor(max_workers=4) as pool:
        clients = list(pool.map(lambda _: Client(server.url, verbose=False,
                                                 httpx_kwargs={"timeout": 60}), range(n_total)))
    rss_before = server_rss_bytes(server.pid)
    started = time.monotonic()
    with RssWatch(server.pid) as memory, ThreadPoolExecutor(max_workers=n_total) as pool:
        heavy = [pool.submit(heavy_request, clients[SHORT_CLIENTS + j], lengths, max_seq)
                 for j, (lengths, max_seq) in enumerate(HEAVY_SWEEPS)]
        short = [pool.submit(short_request, clients[i], i) for i in range(SHORT_CLIENTS)]
        short_results = [f.result(timeout=REQUEST_TIMEOUT_S + 30) for f in short]
        heavy_results = [f.result(timeout=REQUEST_TIMEOUT_S + 30) for f in heavy]
    wall = time.monotonic() - started
    with ThreadPoolExecutor(max_workers=len(clients)) as pool:  # each waits ~1 s on its heartbeat
        list(pool.map(Client.close, clients))

    ok = [s for kind, s, _ in short_results if kind == "ok"]
    report = {
        "short_clients": SHORT_CLIENTS, "short_new_tokens": SHORT_NEW_TOKENS,
        "heavy_clients": len(HEAVY_SWEEPS), "wall_seconds": round(wall, 2),
        "short_completed": len(ok),
        "short_busy": sum(kind == "busy" for kind, _, _ in short_results),
        "short_errors": [m for kind, _, m in short_results if kind == "error"],
        "short_p50_seconds": round(statistics.median(ok), 2) if ok else None,
        "short_p95_seconds": round(percentile(ok, 95), 2) if ok else None,
        "short_max_seconds": round(max(ok), 2) if ok else None,
        "heavy": [{"lengths": lengths, "max_one_at_a_time": max_seq, "outcome": kind,
                   "seconds": round(s, 2), "message": m}
                  for (lengths, max_seq), (kind, s, m) in zip(HEAVY_SWEEPS, heavy_results)],
        "server_rss_before_bytes": rss_before,
        "server_peak_rss_sampled_bytes": int(memory.peak_mb() * 2**20),
        "server_peak_rss_lifetime_bytes": server_peak_rss_bytes(server.pid),
    }
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "load.json").write_text(json.dumps(report, indent=2))
    print(f"\nload: {len(ok)}/{SHORT_CLIENTS} short requests done, {report['short_busy']} busy, "
          f"p50 {report['short_p50_seconds']} s, p95 {report['short_p95_seconds']} s, "
          f"wall {wall:.1f} s; heavy: {[h['outcome'] for h in report['heavy']]}; server RSS "
          f"{rss_before / 1e6:.0f} MB before, peak {memory.peak_mb():.0f} MB during the test")

    assert report["short_errors"] == []
    assert len(ok) + report["short_busy"] == SHORT_CLIENTS
    assert len(ok) >= 1, "every short request was turned away"
    assert all(kind in ("ok", "busy") for kind, _, _ in heavy_results), report["heavy"]
    assert server.alive()
