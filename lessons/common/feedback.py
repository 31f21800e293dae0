"""The one error path from the engine to the learner: every event handler is wrapped by
`guarded`, which turns the project's typed errors into a `gr.Error` with their own message and
anything unexpected into one plain sentence (logged on the server, never shown as a trace).
`guarded` is also where a handler's work is handed to the one compute thread
(`inference.compute_thread`: on a CPU, two threads running the model slow both to one core)."""
from __future__ import annotations

import contextlib
import functools
import logging

import gradio as gr

from inference import compute_thread
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
    """Wrap a handler (plain, or returning/being a generator) so any error reaches the learner
    as a clear message. The wrapped handler is a generator: Gradio streams what it yields, and
    a plain handler's result is its single yield. With `plain=True` it is a plain function
    returning that one result: the event then ends in one message (a Play tick needs this, or
    a Stop pressed while its step runs would still see the step's token arrive).

    `alone`: the app's serving engine (`inference.server.Server`), for a measurement that must
    run alone: the server finishes its current step and waits until the handler is done.

    `compute`: run the handler (each step of a generator) on the compute thread. False only for
    a handler that runs no model and waits on work that needs that thread (a chat waiting for
    the server's steps) or must answer at once (a live view of the server)."""
    if plain:
        streamed = guarded(fn, alone=alone, compute=compute)

        @functools.wraps(fn)
        def once(*args, **kwargs):
            return next(streamed(*args, **kwargs))
        return once

    @functools.wraps(fn)
    def run(*args, **kwargs):
        try:
            with alone.exclusive() if alone is not None else contextlib.nullcontext():
                result = compute_thread.run(fn, *args, **kwargs) if compute else fn(*args,
                                                                                   **kwargs)
                if hasattr(result, "__next__"):
                    yield from compute_thread.iterate(result) if compute else result
                else:
                    yield result
        except Exception as exc:
            raise user_error(exc) from exc
    return run
