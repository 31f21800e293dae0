"""One compute thread for all of the model's arithmetic (inference/compute_thread.py): work
from any thread runs there in order, errors come back to the caller, re-entry does not
deadlock, a generator's steps run there and closing it early runs its cleanup there (queued,
so a closing event loop never waits on a long computation); lesson
handlers and the server's steps are handed to it (a chat handler, which waits on the server,
is not)."""
from __future__ import annotations

import threading

import pytest

from inference import compute_thread
from inference.server import Server
from inference.tokens import prompt_ids
from lessons.feedback import guarded


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


def test_the_servers_steps_run_on_the_compute_thread(lm):
    server = Server(lm)
    where = []
    step = server._step

    def recorded(newcomers):
        where.append(compute_thread.on_compute_thread())
        return step(newcomers)

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
