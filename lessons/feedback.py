"""Turning engine errors into messages a learner can act on (never a stack trace)."""
from __future__ import annotations

import gradio as gr

from inference.errors import InferenceInputError


def user_error(exc: Exception) -> gr.Error:
    """A gr.Error with a plain message; unexpected errors get a generic one."""
    if isinstance(exc, InferenceInputError):
        return gr.Error(str(exc), print_exception=False)
    return gr.Error(f"Something went wrong ({type(exc).__name__}). Try again, or reset the lesson.",
                    print_exception=True)


def guarded(fn):
    """Wrap a handler (plain or generator) so any error reaches the learner as a clear
    message, never a stack trace. The wrapped handler is always a generator."""
    def run(*args):
        try:
            result = fn(*args)
            if hasattr(result, "__next__"):
                yield from result
            else:
                yield result
        except Exception as exc:
            raise user_error(exc) from exc
    return run
