"""One compute thread for all of the model's arithmetic (inference/compute_thread.py): work
from any thread runs there in order, errors come back to the caller, re-entry does not
deadlock, a generator's steps run there and closing it early runs its cleanup there (queued,
so a closing event loop never waits on a long computation); lesson
handlers and the server's steps are handed to it (a chat handler, which waits on the server,
is not)."""
from __future__ import annotations

import os
import threading
import time

import pytest

from inference import compute_thread
from inference.server import Server
from inference.tokens import prompt_ids
from lessons.common.feedback import guarded


def _where() -> int:
    return threading.get_ident()


def test_work_from_any_thread_runs_on_the_one_compute_thread():
    here = compute_thread.run(_where)
    assert here != threading.get_ident() and compute_thread.run(compute_thread.on_compute_thread)
    seen = []
    workers = [threading.Thread(target=lambda: seen.append(compute_thread.run(_where)))
               for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert seen == [here] * 4
    assert not compute_thread.on_compute_thread()


def test_errors_come_back_and_re_entry_runs_inline():
    def fail():
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        compute_thread.run(fail)
    assert compute_thread.run(lambda: compute_thread.run(lambda: 7) + 1) == 8  # no deadlock


def test_a_generators_steps_run_there_and_closing_it_cleans_up_there_later():
    cleaned = []

    def steps():
        try:
            for i in range(5):
                yield i, threading.get_ident()
        finally:
            cleaned.append(threading.get_ident())

    home = compute_thread.run(_where)
    items = compute_thread.iterate(steps())
    first, second = next(items), next(items)
    assert [first[0], second[0]] == [0, 1] and first[1] == second[1] == home
    items.close()  # a Stop or a closed tab, after two of five steps: queued, not awaited
    compute_thread.run(lambda: None)  # the work queued before this has run
    assert cleaned == [home]
    assert [i for i, _ in compute_thread.iterate(steps())] == [0, 1, 2, 3, 4]


def test_handlers_run_on_the_compute_thread_unless_told_not_to():
    home = compute_thread.run(_where)

    def gen():
        yield _where()
        yield _where()

    assert list(guarded(_where)()) == [home]
    assert list(guarded(gen)()) == [home, home]
    assert guarded(_where, plain=True)() == home
    assert list(guarded(_where, compute=False)()) == [threading.get_ident()]


def test_an_async_handler_runs_on_its_loop_and_its_errors_are_worded():
    """The chat is an async generator: `guarded` keeps it on the event loop (never the compute
    thread) and words its errors like any handler's; asking it to compute there is refused."""
    import asyncio

    import gradio as gr

    from inference.errors import InferenceInputError

    async def answer(fail: Exception | None = None):
        yield threading.get_ident()
        if fail is not None:
            raise fail

    async def collect(fail=None) -> list:
        return [x async for x in guarded(answer, compute=False)(fail)]

    here = threading.get_ident()
    assert asyncio.run(collect()) == [here]
    with pytest.raises(gr.Error, match="too long"):
        asyncio.run(collect(InferenceInputError("The prompt is too long.")))
    with pytest.raises(gr.Error) as unexpected:
        asyncio.run(collect(KeyError("row 7")))
    assert "row 7" not in str(unexpected.value) and "Something went wrong" in str(
        unexpected.value)
    with pytest.raises(TypeError, match="event loop"):
        guarded(answer)  # compute=True: an async handler cannot run on the compute thread


def test_the_servers_steps_run_on_the_compute_thread(lm):
    server = Server(lm)
    where = []
    step = server._step

    def recorded():
        where.append(compute_thread.on_compute_thread())
        return step()

    server._step = recorded
    try:
        req = server.submit(prompt_ids(lm.tokenizer, "Hi"), max_new_tokens=3)
        assert len(list(req.events())) == 3
    finally:
        server.close()
    assert where and all(where)


def test_closing_does_not_wait_for_the_work_ahead_of_it():
    started, release = threading.Event(), threading.Event()

    def long_job():
        started.set()
        release.wait(30)

    def steps():
        yield 1
        yield 2

    items = compute_thread.iterate(steps())
    assert next(items) == 1
    busy = threading.Thread(target=compute_thread.run, args=(long_job,))
    busy.start()
    assert started.wait(10)  # the compute thread is now busy with someone's long job
    closer = threading.Thread(target=items.close)  # what Gradio's event loop does on Stop
    closer.start()
    closer.join(10)
    closed_at_once = not closer.is_alive()  # before the long job ends
    release.set()
    busy.join()
    closer.join()
    assert closed_at_once


def _native_threads() -> int:
    """Threads of this process that Python did not start (OpenMP's helpers among them)."""
    return len(os.listdir("/proc/self/task")) - threading.active_count()


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_the_apps_handlers_add_no_openmp_team_from_their_own_threads(app_module):
    """Gradio calls each handler on a thread of its own. A handler that ran the model there
    would give that thread its own OpenMP team (one more native thread while it lives) and
    slow every decode to one core's speed; through the compute thread it adds none."""
    handlers = {f.api_name: f.fn for f in app_module.demo.fns.values() if f.api_name}
    calls = [("prefill_measure", ("Summarise a storm in one line.",)),
             ("tokenize", ("Hello, world", True))]
    for name, args in calls:  # warm-up: the compute thread's team, the tokenizer's pool
        list(handlers[name](*args))
    before = _native_threads()
    hold, done = threading.Event(), []

    def visitor(name, args):
        list(handlers[name](*args))
        done.append(name)
        hold.wait(60)  # stay alive: a team lives as long as its thread

    visitors = [threading.Thread(target=visitor, args=call) for call in calls * 2]
    for v in visitors:
        v.start()
    try:
        assert _wait_for(lambda: len(done) == len(visitors), 120)
        assert _native_threads() <= before  # none added (one may have ended meanwhile)
    finally:
        hold.set()
        for v in visitors:
            v.join()


def _wait_for(condition, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True
