"""The one error path from the engine to the learner: `guarded` wraps every event handler,
turning the project's typed errors into a `gr.Error` with their own message and anything
unexpected into one plain sentence (its trace logged), and hands the handler's work to the one
compute thread, where a measurement takes turns with the server answering the class's chats."""
from __future__ import annotations

import contextlib
import functools
import inspect
import logging

import gradio as gr

from inference import compute_thread
from inference.errors import InferenceInputError

log = logging.getLogger("llm_lab")

UNEXPECTED = ("Something went wrong on the server while running this step. Try again, or press "
              "Reset to start the lesson afresh.")


def user_error(exc: Exception) -> gr.Error:
    if isinstance(exc, gr.Error):
        return exc
    if isinstance(exc, InferenceInputError):
        return gr.Error(str(exc), print_exception=False)
    log.exception("unexpected error in a lesson handler", exc_info=exc)
    return gr.Error(UNEXPECTED, print_exception=False)


def guarded(fn, *, plain: bool = False, alone=None, compute: bool = True):
    """Wrap a handler so any error reaches the learner as a clear message, as a generator (a
    plain handler's result its one yield); `plain=True`: a plain function, so the event ends in
    one message (a Play tick: else a Stop mid-step still sees its token). `alone`: the serving
    engine, for a measurement: each job (the call, then each step) takes turns with the server's
    steps on the compute thread, so chats keep streaming. `compute=False`: a handler that runs
    no model (a chat, a live view); an async generator (the chat) stays on the event loop."""
    if inspect.isasyncgenfunction(fn):  # waits on the event loop itself: runs no model there
        if compute or alone is not None or plain:
            raise TypeError("an async handler runs on the event loop: compute=False only")

        @functools.wraps(fn)
        async def awaited(*args, **kwargs):
            try:
                async for item in fn(*args, **kwargs):
                    yield item
            except Exception as exc:
                raise user_error(exc) from exc
        return awaited
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
                    lambda job, *a: alone.turns.turn(compute_thread.within(seen, job), *a))
                result = call(functools.partial(fn, *args, **kwargs)) if compute else fn(
                    *args, **kwargs)
                if hasattr(result, "__next__"):
                    yield from compute_thread.iterate(result, call) if compute else result
                else:
                    yield result
        except Exception as exc:
            raise user_error(exc) from exc
    return run
