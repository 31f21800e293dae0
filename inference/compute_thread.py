"""All of the model's arithmetic on one thread, and why that makes a CPU app faster.

PyTorch splits each CPU operation over the cores with OpenMP, which keeps a team of helper
threads for every thread that calls it. Once GNU OpenMP manages more threads than cores, its
helpers sleep between operations, and each of a decode step's ~200 matrix products must wake
them: a web app running the model on many request threads decodes at about one core's speed.

So every computation is handed to one long-lived thread (`run`, or `iterate` for a generator
whose steps the caller streams), loading included; called from the compute thread itself, both
run inline. Whatever waits for other work (a chat handler waiting for the server) must not run
here: it would wait for itself. One job at a time makes a job a unit of honest timing: a lesson
measurement's steps are jobs, so the server's steps run between them, never inside one.
When the work stops for `Settings.idle_trim_s`, freed memory goes back to the system (`idle`).
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from .config import Settings
from .idle_trim import IdleHook

T = TypeVar("T")
log = logging.getLogger(__name__)
NAME = "llm-lab-compute"

_ident: list[int] = []  # the compute thread's id, once it has started
_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=NAME,
                               initializer=lambda: _ident.append(threading.get_ident()))


def _give_back() -> None:
    """Hand the memory the work freed back to the system, on the compute thread (so never
    beside a timed pass)."""
    from .cache_budget import trim_heap  # imports the model's modules, so not at start-up

    for release in idle.extras():  # the KV pool's free blocks (`IdleHook.also`)
        try:
            release()
        except Exception:  # memory kept is not the work's failure
            log.exception("giving memory back failed")
    trim_heap()


# idle_trim.py says why; queued uncounted, so giving back starts no other idle spell
idle = IdleHook(Settings().idle_trim_s, lambda: _executor.submit(_give_back))


def submit(fn: Callable[..., T], *args, **kwargs) -> Future:
    """Queue `fn(*args, **kwargs)`, counted as work (`idle`), and return its Future at once
    (for a caller holding a lock of its own; not from the compute thread itself, which would
    wait for itself)."""
    idle.started()
    future = _executor.submit(fn, *args, **kwargs)
    future.add_done_callback(lambda _: idle.finished())
    return future


def on_compute_thread() -> bool:
    """True when the caller is the compute thread."""
    return bool(_ident) and threading.get_ident() == _ident[0]


def run(fn: Callable[..., T], *args, **kwargs) -> T:
    """`fn(*args, **kwargs)` on the compute thread; its result, or its exception raised here."""
    if on_compute_thread():
        return fn(*args, **kwargs)
    return submit(fn, *args, **kwargs).result()


_DONE = object()


def iterate(gen: Iterator[T], call: Callable[..., object] = run) -> Iterator[T]:
    """Each step of `gen` on the compute thread, its items yielded here; `call(fn, *args)` runs
    one step there (a measurement passes the server's `turn`). Closing this iterator queues
    closing `gen` there without waiting: Gradio closes a stopped handler on its event loop."""
    if on_compute_thread():
        yield from gen
        return
    try:
        while (item := call(next, gen, _DONE)) is not _DONE:
            yield item
    finally:
        if hasattr(gen, "close"):  # a generator (a plain iterator has nothing to clean up)
            submit(gen.close)
