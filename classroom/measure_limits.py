"""Limits of one measurement, for every heavy button at once: a work budget and a time limit.

A measurement (a race, a sweep, a comparison: the events of the "heavy" lane) holds the lane
while it runs, so its cost is everyone's wait. Two limits, from `Settings`, apply to all of them
from one place (`limit_measurements`, called once by app.py after the Blocks are built):

- **Work budget** (`measure_work_tokens`): before a run starts, its settings give the tokens it
  will feed through the model, all passes together (tokens × passes: a recomputing race feeds
  the whole sequence every step). Over the budget, the request is refused at once with a
  sentence naming the budget, before it waits anywhere or runs a pass (checked when the event
  joins the queue, `over_budget`). Each lesson says how its settings turn into tokens
  (`lessons.measurement_work.WORK`: every heavy event has an entry); an event whose lesson
  offers more than the budget has its own (`lessons.measurement_work.BUDGETS`).
- **Time limit** (`measure_limit_s`): a run still going after it stops at its next chunk (the
  next frame it shows), frees the lane and shows what it measured so far under a sentence.

Identical requests share one run on top of both (`classroom.shared_runs`).
"""
from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator

import gradio as gr
from gradio.context import LocalContext

from inference.config import Settings

from .input_check import InputRefused, check_inputs
from .shared_runs import SharedRuns

HEAVY = "heavy"  # the concurrency lane of every measurement
clock = time.monotonic  # the time limit's clock (seconds; a test may step it)

TIME_UP = ("⏱ **Stopped at this measurement's time limit ({s:.0f} s)**, so the others waiting "
           "could have their turn. What it measured so far is below; fewer tokens or fewer "
           "sizes fit in the limit.")
OVER_BUDGET = ("This measurement would feed about {work:,} tokens through the model (tokens × "
               "passes, all passes together); one measurement may feed at most {budget:,}. Use "
               "fewer new tokens, a shorter prompt or fewer sizes.")

Work = Callable[[object, Settings, dict, list], int]  # (lm, settings, named, values) -> tokens


def named_values(block_fn, data: list) -> dict:
    """The event's raw input values by each input's elem_id (else its label)."""
    return {(c.elem_id or getattr(c, "label", None) or str(c._id)): v
            for c, v in zip(block_fn.inputs, data or [])}


def work_budget(api_name: str | None, settings: Settings,
                budgets: dict[str, int] | None = None) -> int:
    """The most tokens one run of the event may feed: its own budget where its lesson offers
    more (`budgets`: `lessons.measurement_work.BUDGETS`), else `Settings.measure_work_tokens`."""
    return (budgets or {}).get(api_name or "", settings.measure_work_tokens)


def over_budget(block_fn, data: list, lm, settings: Settings, work: dict[str, Work],
                budgets: dict[str, int] | None = None) -> str | None:
    """The refusal sentence when the event's settings exceed its work budget, else None."""
    estimate = work.get(block_fn.api_name or "")
    if estimate is None:
        return None
    try:  # values the input check refuses get its sentence (a length not offered is not work)
        check_inputs(block_fn, list(data or []), {}, settings.max_prompt_chars)
    except InputRefused:
        return None
    try:
        tokens = int(estimate(lm, settings, named_values(block_fn, data), list(data or [])))
    except Exception:  # malformed settings: the input check or the handler words the refusal
        return None
    budget = work_budget(block_fn.api_name, settings, budgets)
    if tokens <= budget:
        return None
    return OVER_BUDGET.format(work=tokens, budget=budget)


def limit_measurements(demo: gr.Blocks, settings: Settings, runs: SharedRuns) -> None:
    """Wrap every heavy event's handler: shared runs, and the per-measurement time limit."""
    for block_fn in demo.fns.values():
        if block_fn.concurrency_id == HEAVY and block_fn.fn is not None:
            block_fn.fn = _measured(block_fn.fn, _first_markdown(block_fn), settings, runs)


def _first_markdown(block_fn):
    """The output a sentence goes into: the event's first Markdown (its progress line)."""
    for i, c in enumerate(block_fn.outputs):
        if isinstance(c, gr.Markdown):
            return i, c
    return None


def _measured(fn, markdown, settings: Settings, runs: SharedRuns):
    annotate = functools.partial(with_sentence, markdown)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        def start() -> Iterator:
            return timed(fn(*args, **kwargs), settings.measure_limit_s, annotate)
        event_id = LocalContext.event_id.get(None)
        tagged = runs.take(event_id)
        yield from start() if tagged is None else runs.share(
            tagged[0], start, annotate, asked_at=tagged[1], event_id=event_id)
    return run


def timed(frames: Iterator, limit_s: float, annotate) -> Iterator:
    """`frames` until `limit_s` has passed, checked after each one; then stop the run (it
    frees the lane and the compute thread) and show its last outputs under TIME_UP."""
    begun, merged = clock(), None
    try:
        for frame in frames:
            merged = {**merged, **frame} if isinstance(frame, dict) and isinstance(
                merged, dict) else frame
            yield frame
            if clock() - begun > limit_s:
                frames.close()
                yield annotate(merged, TIME_UP.format(s=limit_s))
                return
    finally:
        frames.close()


def with_sentence(markdown, frame, sentence: str):
    """`frame` with `sentence` shown above its Markdown output's text (or as a toast)."""
    if markdown is None:
        gr.Warning(sentence.replace("*", ""))
        return frame
    index, component = markdown
    if isinstance(frame, dict):
        old = frame.get(component)
        return {**frame, component: _above(sentence, old)}
    if isinstance(frame, (tuple, list)):
        values = list(frame)
        values[index] = _above(sentence, values[index])
        return tuple(values)
    return _above(sentence, frame) if index == 0 else frame


def _above(sentence: str, old) -> str:
    text = old.get("value") if isinstance(old, dict) else old
    return sentence if not isinstance(text, str) or not text else f"{sentence}\n\n{text}"
