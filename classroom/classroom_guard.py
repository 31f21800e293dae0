"""What keeps one visitor from spoiling the shared app for the room: fair queueing, no
uploads (no lesson takes a file, so the upload route answers 403), and a sentence instead of a
bare "Error" when an API client sends a word where a number belongs (Gradio checks slider and
number values before any handler runs; `explain_bad_numbers` words its refusals).

Fair queueing: one visitor cannot fill the queue for everyone.

Gradio keeps one queue per concurrency lane ("model", "heavy", "chat", ...) and refuses new
events only when all of them together are full, so one script (or one very impatient
student) joining 66 events locks every other visitor out. `limit_per_session` puts two
checks in front of Gradio's own, at the moment an event asks to join:

- a session may have at most `per_session` events waiting or running at once;
- a lane may have at most `per_lane` events waiting.

With `fair` (`Fairness`), per visitor (`visitor_token.visitor_of`: the server-signed token
the page gave, else the network address, `client_address`: twelve session hashes from one
script are one visitor), and per address only as a class-sized ceiling (a school reaches the
app through one address, so a class is one address, not one abuser):

- a visitor may have at most `client_events` events waiting or running, all lanes and tabs;
- an address may have at most `address_events`, all its visitors together;
- a visitor may have at most `client_heavy_jobs` measurements in the heavy lane, so another
  visitor's measurement waits behind at most that many of theirs; an address at most
  `class_size` visitors' worth of them;
- a measurement identical to one waiting in the heavy lane, running or just finished
  (`shared_runs`) does not wait in the heavy lane at all: it moves to a lane of its own and
  follows that run. The first of a kind reserves its run as it joins the heavy lane, so a class
  pressing the same button within a few seconds, while that run still waits behind other
  lessons' measurements, is served by it as soon as it is measured, not after every other
  measurement in line (`make bench-classroom`, before this: the KV race's and batch sweep's
  followers got their results at 159 s, their leaders' runs having ended at 60 s and 96 s).
  A follower holds one of Gradio's worker slots while it waits, so followers together may
  hold at most half of them (`JOINED_SHARE`); past that, an identical measurement takes the
  heavy lane like any other. Followers ask the queue (`in_queue`) whether the run's leader is
  still waiting or running, and end with a sentence when it left;
- a measurement over its work budget (`Measurement.over_budget`, from the arguments its
  handler would get: `handler_values`) is refused at once.

The measurements are read from the built app: each event wired by
`lessons.common.measurement_wiring.wire_measurement` carries its `Measurement`.

A refused event gets HTTP 503 with a sentence saying why; everyone else is served.
"""
from __future__ import annotations

import asyncio
import functools
import json
from dataclasses import dataclass

import gradio as gr
from gradio.context import LocalContext
from gradio.queueing import EventQueue

from inference.config import Settings
from lessons.common.measurement import HEAVY
from lessons.common.measurement_wiring import measurement_of

from .client_address import counted, request_address
from .input_check import InputRefused, check_inputs
from .shared_runs import SharedRuns, run_key
from .visitor_token import visitor_of

SESSION_FULL = ("You already have {n} requests waiting or running in this tab. Wait for them "
                "to finish (or press Stop), then try again.")
LANE_FULL = ("{n} requests are already waiting for this part of the app. Please try again in "
             "a few seconds.")
VISITOR_FULL = ("You already have {n} requests waiting or running (every tab of yours "
                "together). Wait for some to finish, then try again.")
ADDRESS_FULL = ("Your network address already has {n} requests waiting or running, a whole "
                "class's worth (everyone sharing it counts: a school network is one address). "
                "Wait for some to finish, then try again.")
HEAVY_FULL = ("You already have {n} measurement(s) running or waiting. The room shares one "
              "lane for measurements, one at a time per visitor; the same measurement with the "
              "same settings joins the run already going. Try again when yours has finished.")
CLASS_HEAVY_FULL = ("Your network address already has {n} measurements running or waiting, one "
                    "for each of a class of {size} (everyone sharing it counts: a school "
                    "network is one address). Try again when one of them has finished.")
JOINED = "joined"  # the lane of measurements that follow an identical run (no limit: no work)
JOINED_SHARE = 0.5  # of Gradio's worker slots, the most that followers may hold at once


@dataclass(frozen=True)
class Fairness:
    """What the per-address checks need: the limits and the shared runs."""

    settings: Settings
    runs: SharedRuns


def limit_per_session(demo: gr.Blocks, per_session: int, per_lane: int,
                      fair: Fairness | None = None) -> None:
    """Wrap `demo`'s queue so each join is checked first (call after `demo.queue()`)."""
    queue = demo._queue
    admit = queue.push
    lock = asyncio.Lock()
    if fair is not None:
        fair.runs.in_queue = functools.partial(in_queue, queue)
        fair.runs.event_id = lambda: LocalContext.event_id.get(None)  # the running handler's

    async def push(body, request, username):
        async with lock:  # the check and Gradio's append happen together
            fn = demo.fns.get(body.fn_index) if body.fn_index is not None else None
            waiting = [e for lane in queue.event_queue_per_concurrency_id.values()
                       for e in lane.queue]
            running = [e for job in queue.active_jobs if job for e in job]
            mine = sum(e.session_hash == body.session_hash for e in waiting + running)
            if body.session_hash and mine >= per_session:
                return False, SESSION_FULL.format(n=mine), "queue_full"
            key = join = None
            if fair is not None and fn is not None:
                refusal, key, join = _by_client(demo, fair, fn, body, request, waiting,
                                                running)
                if refusal:
                    return False, refusal, "queue_full"
            lane = queue.event_queue_per_concurrency_id.get(getattr(fn, "concurrency_id", None))
            if not join and lane is not None and len(lane.queue) >= per_lane:
                return False, LANE_FULL.format(n=len(lane.queue)), "queue_full"
            admitted = await admit(body, request, username)
            if key is not None and admitted[0]:
                fair.runs.tag(admitted[1], key)
                if join:
                    fair.runs.join(admitted[1], key)
                    _move_to_joined(queue, queue.event_ids_to_events.get(admitted[1]))
                else:  # it will lead: identical presses from now on follow it
                    fair.runs.reserve(admitted[1], key)
            return admitted

    queue.push = push


def _by_client(demo, fair: Fairness, fn, body, request, waiting: list, running: list) -> tuple:
    """(refusal or None, the run key of a measurement or None, whether it follows a run)."""
    s = fair.settings
    address = request_address(request, s.trusted_proxies)
    counts = counted(address)
    if counts:
        visitor = visitor_of(request, s.trusted_proxies)
        at_address = [e for e in waiting + running
                      if request_address(e.request, s.trusted_proxies) == address]
        theirs = [e for e in waiting + running  # a token is one visitor on any address
                  if visitor_of(e.request, s.trusted_proxies) == visitor]
        if len(theirs) >= s.client_events:
            return VISITOR_FULL.format(n=len(theirs)), None, False
        if len(at_address) >= s.address_events:
            return ADDRESS_FULL.format(n=len(at_address)), None, False
    m = measurement_of(fn)
    if fn.concurrency_id != HEAVY or m is None:
        return None, None, False
    values = handler_values(demo, fn, body.data, body.session_hash, s.max_prompt_chars)
    key = None if values is None else run_key(m.name, values)
    followers = sum(e.concurrency_id == JOINED for e in waiting + running)
    room = followers < JOINED_SHARE * demo._queue.max_thread_count
    # reserved (waiting in line), measuring or just finished; or running, not reserved
    join = key is not None and room and (fair.runs.live(key) or any(
        e.concurrency_id == HEAVY and e.data is not None and measurement_of(e.fn) is not None
        and _key(demo, e.fn, e.data, s) == key for e in running))
    if join:
        return None, key, True
    if counts:
        heavy = [e for e in theirs if e.concurrency_id == HEAVY]
        if len(heavy) >= s.client_heavy_jobs:
            return HEAVY_FULL.format(n=len(heavy)), None, False
        school = [e for e in at_address if e.concurrency_id == HEAVY]
        if len(school) >= s.class_size * s.client_heavy_jobs:
            return CLASS_HEAVY_FULL.format(n=len(school), size=s.class_size), None, False
    if values is None:  # a value that does not fit its control: the input check words it
        return None, None, False
    try:
        return m.over_budget(s, *call_args(fn, values)), key, False
    except Exception:  # noqa: BLE001 - the run's own check raises it through the error path
        return None, key, False


def _key(demo, fn, body, settings: Settings) -> tuple | None:
    values = handler_values(demo, fn, body.data, body.session_hash, settings.max_prompt_chars)
    return None if values is None else run_key(measurement_of(fn).name, values)


def handler_values(demo, fn, data, session_hash: str | None, max_chars: int) -> list | None:
    """The event's values as its handler gets them, one per input: Gradio's own preprocessing
    of what was sent, and a gr.State input's value in this session (kept on the server, sent
    as null). None when a value does not fit its control (the input check refuses it)."""
    try:
        sent = check_inputs(fn, list(data or []), {}, max_chars)
    except InputRefused:
        return None
    holder = getattr(demo, "state_holder", None)
    session = getattr(holder, "session_data", {}).get(session_hash)
    values = []
    try:
        for block, value in zip(fn.inputs, sent):
            if block.stateful:  # read, never created here (the session's own copy, if any)
                kept = session.state_data if session is not None else {}
                values.append(kept[block._id] if block._id in kept else block.value)
                continue
            model = getattr(block, "data_model", None)
            if model is not None and value is not None:
                value = model.model_validate(value, context={"validate_meta": True})
            values.append(block.preprocess(value) if fn.preprocess else value)
    except Exception:  # noqa: BLE001 - what Gradio's own preprocessing refuses, it words
        return None
    return values


def call_args(fn, values: list) -> list:
    """The handler's positional arguments: the values, or one dict of them by component."""
    return [dict(zip(fn.inputs, values))] if fn.inputs_as_dict else values


def in_queue(queue, event_id: str) -> bool:
    """True while the event waits in a lane or runs: Gradio drops it from `event_ids_to_events`
    when it ends or leaves the line (Stop, a closed tab), and marks a running one not alive when
    its tab closes."""
    event = queue.event_ids_to_events.get(event_id)
    return event is not None and event.alive


def _move_to_joined(queue, event) -> None:
    """Take a following event out of the heavy lane: it waits for no one and runs nothing."""
    if event is None:
        return
    lanes = queue.event_queue_per_concurrency_id
    if event in lanes[event.concurrency_id].queue:
        lanes[event.concurrency_id].queue.remove(event)
        event.concurrency_id = JOINED
        lanes.setdefault(JOINED, EventQueue(JOINED, None)).queue.append(event)


UPLOADS_OFF = "This app takes no files: uploads are switched off."


class RefuseUploads:
    """ASGI middleware: every POST to an `.../upload` route gets 403 and a sentence."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if (scope.get("type") == "http" and scope.get("method") == "POST"
                and scope.get("path", "").rstrip("/").endswith("/upload")):
            body = json.dumps({"detail": UPLOADS_OFF}).encode()
            await send({"type": "http.response.start", "status": 403,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def explain_bad_numbers(demo: gr.Blocks) -> None:
    """Every slider and number box refuses a non-number (or NaN) with its own label."""
    for block in demo.blocks.values():
        if isinstance(block, (gr.Slider, gr.Number)):
            block.preprocess = _worded(block.preprocess, block.label or "This setting")


def _worded(preprocess, label: str):
    def run(value):
        if isinstance(value, float) and value != value:
            raise gr.Error(f"{label} must be a number (got NaN).", print_exception=False)
        try:
            return preprocess(value)
        except gr.Error:
            raise  # Gradio's own range messages already say what is allowed
        except (TypeError, ValueError) as exc:
            raise gr.Error(f"{label} must be a number (got {str(value)[:40]!r}).",
                           print_exception=False) from exc
    return run
