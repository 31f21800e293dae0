"""The one error path from the engine to the learner: every event handler is wrapped by
`guarded`, which turns the project's typed errors into a `gr.Error` with their own message and
anything unexpected into one plain sentence (logged on the server, never shown as a trace).
`guarded` is also where a handler's work is handed to the one compute thread
(`inference.compute_thread`: on a CPU, two threads running the model slow both to one core),
and where a lesson measurement takes turns there with the server that answers the class's
chats (`Server.turn`), instead of stopping it."""
from __future__ import annotations

import contextlib
import functools
import inspect
import logging

import gradio as gr

from inference import compute_thread, served_alongside
from inference.errors import InferenceInputError

log = logging.getLogger("llm_lab")

UNEXPECTED = ("Something went wrong on the server while running this step. Try again, or press "
              "Reset to start the lesson afresh.")


def user_error(exc: Exception) -> gr.Error:
    """A gr.Error with a plain message; unexpected errors get a generic one (no class names)."""
    if isinstance(exc, gr.Error):
        return exc
    if isinstance(exc, InferenceInputError):
        return gr.Error(str(exc), print_exception=False)
    log.exception("unexpected error in a lesson handler", exc_info=exc)
    return gr.Error(UNEXPECTED, print_exception=False)


def guarded(fn, *, plain: bool = False, alone=None, compute: bool = True):
    """Wrap a handler so any error reaches the learner as a clear message. The wrapped handler
    is a generator (a plain handler's result is its single yield); with `plain=True` a plain
    function, so the event ends in one message (a Play tick needs this, or a Stop pressed while
    its step runs would still see the step's token arrive).

    `alone`: the serving engine, for a measurement whose timed passes run alone: each job of the
    handler (the call, then each step of its generator) takes turns with the server's steps on
    the compute thread (`Server.turn`), so chats keep streaming (counted for its caption,
    `inference.served_alongside`). `compute=False`: for a handler that runs no model and waits
    on that thread's work (a chat) or must answer at once (a live view); an async generator (the
    chat) stays on the event loop, where it awaits its tokens."""
    if inspect.isasyncgenfunction(fn):  # waits on the event loop itself: runs no model there
        if compute or alone is not None or plain:
            raise TypeError("an async handler runs on the event loop: compute=False only")
        return _guarded_async(fn)
    if plain:
        streamed = guarded(fn, alone=alone, compute=compute)

        @functools.wraps(fn)
        def once(*args, **kwargs):
            return next(streamed(*args, **kwargs))
        return once

    @functools.wraps(fn)
    def run(*args, **kwargs):
        try:
            with alone.turns.alongside() if alone is not None else contextlib.nullcontext() as seen:
                call = compute_thread.run if alone is None else (
                    lambda job, *a: alone.turns.turn(served_alongside.within(seen, job), *a))
                result = call(functools.partial(fn, *args, **kwargs)) if compute else fn(
                    *args, **kwargs)
                if hasattr(result, "__next__"):
                    yield from compute_thread.iterate(result, call) if compute else result
                else:
                    yield result
        except Exception as exc:
            raise user_error(exc) from exc
    return run


def _guarded_async(fn):
    """`guarded` for an async generator (the chat, awaiting its tokens on the event loop)."""
    @functools.wraps(fn)
    async def run(*args, **kwargs):
        try:
            async for item in fn(*args, **kwargs):
                yield item
        except Exception as exc:
            raise user_error(exc) from exc
    return run
