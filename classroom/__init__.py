"""The web layer a public class needs, installed on the built app by one call: `install(demo)`.

A Space serves a whole room from one process, so the page's web server needs more than Gradio's
queue gives: a fair share per visitor, told by a token the server signs and gives with the page
(`visitor_token`), and a class-sized ceiling per network address (`classroom_guard`,
`client_address`: the hop a trusted proxy added, never the client's own), identical measurements
run once (`shared_runs`), the others wait their turn in one line that shows each press its place
and wait, and each measurement's work budget and time limit come with its wiring
(`lessons.common.measurement`), every input checked against its component
before a handler sees it (`input_check`), bounded sessions (`session_budget`), request-size
limits and worded errors (`request_limits`, `cancels`), answers nobody reads stopped
(`unread_streams`), and two per-visitor costs of the web stack removed (`web_costs`).

What Gradio's public API offers is used first: `demo.queue(max_size=, default_concurrency_limit=)`,
per-event `concurrency_id`/`concurrency_limit`, `cancels=[...]` and Starlette middleware on the
app (`middleware()` below, passed to `launch(app_kwargs=...)`). The rest reaches into Gradio's
private internals (its queue's `push`, a block's `preprocess`, `Blocks.preprocess_data`, the queue's
poll intervals, `SessionState.__init__`): each such module says what Gradio lacks. Those patches
are made only on the Gradio version they were written and tested against (`PINNED_GRADIO`, the
version in requirements.txt); on any other, `install` makes none, says so in the log, and the app
runs on Gradio's own queue limits (a measurement's budget and time limit come with its wiring,
so they still hold).
"""
from __future__ import annotations

import logging

import gradio as gr
from starlette.middleware import Middleware

from inference.config import Settings

from .cancels import CleanCancels
from .classroom_guard import Fairness, RefuseUploads, explain_bad_numbers, limit_per_session
from .input_check import check_every_input
from .request_limits import LimitRequestSize, WordValidationErrors
from .session_budget import bound_sessions
from .shared_runs import SharedRuns
from .unread_streams import stop_unread_streams
from .visitor_token import VisitorCookies, VisitorTokens, visitor_of
from .web_costs import calm_queue, trim_web_costs

PINNED_GRADIO = "6.31.0"  # the version the private patches below were written against
log = logging.getLogger(__name__)
REFUSED = ("classroom: Gradio %s is not the pinned %s, so its private queue and session "
           "internals are left unpatched: per-visitor and per-address fairness, identical "
           "presses joining one run, the session sweep, the input checks and stopping answers "
           "nobody reads are off; Gradio's own queue limits apply (each measurement's budget "
           "and time limit still hold)")


def install(demo: gr.Blocks, settings: Settings, fair: Fairness,
            gradio_version: str = gr.__version__) -> bool:
    """Install the class's limits on `demo` (after `demo.queue()`); False when the Gradio
    version is not the pinned one, and nothing private was patched (logged)."""
    demo.state_session_capacity = settings.sessions_held  # public: Gradio's own session cap
    if gradio_version != PINNED_GRADIO:
        log.warning(REFUSED, gradio_version, PINNED_GRADIO)
        return False
    bound_sessions(demo, settings.sessions_held, settings.state_ttl_s, settings.session_closed_s)
    trim_web_costs()
    calm_queue(demo, settings.queue_poll_s)  # it looked for work every 1 ms, idle or not
    limit_per_session(demo, settings.session_events, settings.lane_waiting, fair=fair)
    explain_bad_numbers(demo)
    check_every_input(demo, settings.max_prompt_chars)  # arity, types, limits: every endpoint
    stop_unread_streams(demo, settings.unread_stream_s, settings.unread_poll_s)
    return True


def middleware(settings: Settings) -> list[Middleware]:
    """The request-level limits, as Starlette middleware for `launch(app_kwargs=...)`."""
    tokens = VisitorTokens(settings.visitor_tokens_per_address, settings.visitor_token_window_s)
    return [Middleware(LimitRequestSize, max_bytes=settings.max_request_bytes),
            Middleware(RefuseUploads), Middleware(CleanCancels),
            Middleware(WordValidationErrors),
            Middleware(VisitorCookies, tokens=tokens, trusted_proxies=settings.trusted_proxies)]


__all__ = ["Fairness", "SharedRuns", "install", "middleware", "visitor_of", "PINNED_GRADIO"]
