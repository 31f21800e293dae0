"""Memory that comes back (`inference/compute_thread.py`): once the compute thread's work has
stopped for `Settings.idle_trim_s`, the freed heap is handed back, once per idle spell and
never while work runs. First `IdleHook` on hand-made jobs, then the real server on the real
model: a chat ends, the server goes idle, and the trim runs on the compute thread."""
from __future__ import annotations

import threading

from inference import compute_thread
from inference.compute_thread import IdleHook
from inference.config import Settings
from inference.sampling import SamplingSettings
from inference.server import Server
from polling import wait_for

IDLE_S = 0.2


def test_the_hook_runs_once_per_idle_spell_and_never_while_work_runs():
    calls: list[int] = []
    idle = IdleHook(IDLE_S, lambda: calls.append(1))
    idle.started()
    idle.started()
    idle.finished()  # one job still running: not idle
    assert not wait_for(lambda: calls, timeout=5 * IDLE_S)
    idle.finished()
    assert wait_for(lambda: len(calls) == 1, timeout=30)
    assert not wait_for(lambda: len(calls) > 1, timeout=5 * IDLE_S)  # once per spell
    idle.started()  # new work, then idle again: a second trim
    idle.finished()
    assert wait_for(lambda: len(calls) == 2 and idle.calls == 2, timeout=30)


def test_work_arriving_before_idle_s_postpones_the_hook():
    calls: list[int] = []
    idle = IdleHook(60.0, lambda: calls.append(1))
    idle.started()
    idle.finished()
    idle.started()  # within the minute: the spell never reached idle_s
    assert not wait_for(lambda: calls, timeout=0.5)
    assert IdleHook(0, lambda: calls.append(1)).after_s == 0  # 0 = never: no watcher either


def test_the_server_going_idle_trims_the_heap_on_the_compute_thread(lm, chat_ids, monkeypatch):
    trims: list[bool] = []
    monkeypatch.setattr(compute_thread, "trim_heap",
                        lambda: trims.append(compute_thread.on_compute_thread()))
    monkeypatch.setattr(compute_thread.idle, "after_s", IDLE_S)
    srv = Server(lm, Settings(unread_stream_s=0))
    try:
        answer = srv.submit(chat_ids, SamplingSettings(), 8)
        tokens = [e.token_id for e in answer.events()]
        assert len(tokens) == 8
        assert wait_for(lambda: trims, timeout=60)  # the chat ended: idle, then trimmed
        assert trims[0] is True  # on the compute thread, never beside a timed pass
        done = len(trims)
        running = threading.Event()
        blocker = compute_thread.submit(running.wait, 30)  # work in progress: no trim
        assert not wait_for(lambda: len(trims) > done, timeout=5 * IDLE_S)
        running.set()
        blocker.result()
        assert wait_for(lambda: len(trims) > done, timeout=60)
    finally:
        srv.close()


def test_an_idle_app_lets_go_of_lesson_6s_built_copies(lm, monkeypatch):
    """A quantized copy is kept while work runs (a second ask within the job reuses it) and
    dropped once the compute thread idles, so the ~0.5 GB lesson 6 builds can go back."""
    import gc
    import weakref

    from inference.experiments.shared_results import SharedResults
    from inference.quantize import build_mode

    monkeypatch.setattr(compute_thread.idle, "after_s", IDLE_S)
    shared = SharedResults()
    compute_thread.idle.also(shared.release_idle)
    first, again = compute_thread.run(
        lambda: (build_mode(lm, "int8", shared), build_mode(lm, "int8", shared)))
    assert again is first and first.model is not lm.model
    copy = weakref.ref(first.model)
    del first, again
    assert wait_for(lambda: gc.collect() >= 0 and copy() is None, timeout=60)
    assert shared.get(("quant-model", "int8", str(lm.device))) is None
