"""Bounded memory per visitor session: what the server keeps for each browser tab or API
client is dropped when that session ends or idles, and there is a cap on sessions held.

Gradio keeps a `SessionState` (a copy of every component's config, about half a MB for this
app) for each session hash a client sends, up to 10,000 of them, and frees one only when that
cap pushes it out: an API client that sends a fresh hash per call adds ~0.5 MB a call, for
good. Here the cap is `Settings.sessions_held` (oldest-used dropped first, as Gradio does),
and a sweep every few seconds drops a session whose tab closed `session_closed_s` ago or that
nobody has used for `state_ttl_s` (the same hour after which the lessons drop their own state).

Dropping is not enough for the process's memory: glibc keeps the freed heap for reuse, so RSS
stayed at its peak (2,000 fresh sessions: +70 MB, and none of it came back once all were
dropped; `malloc_trim` gave it all back). So a sweep that dropped sessions hands the freed heap
back to the system (`trim_heap`), as the held-cache budget does after freeing caches.
"""
from __future__ import annotations

import datetime
import logging
import threading
import time

import gradio as gr

from inference.compute_thread import trim_heap

log = logging.getLogger("llm_lab")

SWEEP_EVERY_S = 5.0


def sweep_sessions(holder, now: datetime.datetime, idle_s: float, closed_s: float) -> int:
    """Drop every session in Gradio's `StateHolder` that closed over `closed_s` ago or was
    last used over `idle_s` ago (its State values' delete callbacks run); return how many."""
    dropped = 0
    for session in list(holder.session_data):
        state = holder.session_data.get(session)
        last = holder.time_last_used.get(session)
        if state is None:
            continue
        age_s = (now - last).total_seconds() if last is not None else float("inf")
        if age_s > idle_s or (state.is_closed and age_s > closed_s):
            holder.delete_state(session)  # runs each State's delete callback
            with holder.lock:
                holder.session_data.pop(session, None)
                holder.time_last_used.pop(session, None)
            dropped += 1
    return dropped


def sweep_app(holder, held: int, idle_s: float, closed_s: float, trim=trim_heap) -> int:
    """One sweep of the app's `StateHolder`: keep its cap at `held`, drop ended or idle
    sessions, and when some were dropped hand the freed heap back (`trim`); return how many."""
    holder.capacity = min(holder.capacity, held)
    dropped = sweep_sessions(holder, datetime.datetime.now(), idle_s, closed_s)
    if dropped:
        trim()  # else RSS stays at its peak (see the module docstring)
    return dropped


def bound_sessions(demo: gr.Blocks, held: int, idle_s: float, closed_s: float) -> None:
    """Cap the sessions `demo` holds at `held` and sweep ended or idle ones (call before
    launch; the sweep starts when the app does and runs in a daemon thread)."""
    demo.state_session_capacity = held  # read by Gradio's StateHolder when the app starts

    def sweep_forever() -> None:
        while True:
            time.sleep(SWEEP_EVERY_S)
            holder = getattr(demo, "state_holder", None)
            if holder is None or not hasattr(holder, "session_data"):
                continue
            try:
                sweep_app(holder, held, idle_s, closed_s)
            except Exception:  # a sweep that failed is tried again; the server keeps going
                log.exception("sweeping ended visitor sessions failed")

    threading.Thread(target=sweep_forever, name="session-sweep", daemon=True).start()
