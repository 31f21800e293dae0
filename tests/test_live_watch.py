"""The server view's live watch costs the class one computation per interval, however many
tabs watch it (each tab's own frames once slowed the chat it watched to a crawl)."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from lessons.common.latest import SharedSnapshot


def test_freeze_thirty_watchers_share_one_snapshot_per_interval():
    calls = []

    def compute():
        calls.append(time.monotonic())
        time.sleep(0.05)  # a computation that takes a while: the others must wait, not redo it
        return len(calls)

    live = SharedSnapshot(compute, interval_s=0.5)
    with ThreadPoolExecutor(max_workers=30) as pool:
        seen = list(pool.map(lambda _: live.get(), range(30)))
    assert seen == [1] * 30 and live.computations == 1
    deadline = time.monotonic() + 5
    while live.get() == 1:  # the next interval: one new computation for everyone
        assert time.monotonic() < deadline, "the snapshot never refreshed"
    assert live.computations == 2


def test_freeze_app_server_view_watchers_cause_one_stats_computation(app_module):
    """Through the app's own handler: 30 tabs' ticks at once read one `Server.stats()`."""
    demo, server = app_module.demo, app_module.SERVER
    fn = next(f for f in demo.fns.values() if f.api_name == "server_stats").fn
    real, count = server.stats, []

    def counted():
        count.append(1)
        return real()

    server.stats = counted
    try:
        with ThreadPoolExecutor(max_workers=30) as pool:
            shown = list(pool.map(lambda _: next(fn()), range(30)))
    finally:
        server.stats = real
    assert len(count) <= 1 and len(shown) == 30
    assert all(s is shown[0] for s in shown)  # every tab got the one snapshot
    text = next(v for v in shown[0].values() if isinstance(v, str))
    assert text.strip()
