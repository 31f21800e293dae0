"""The one way a heavy button is wired: `wire_measurement(button, inputs, outputs, m, ctx)`.

It clicks `m.run` in the heavy lane (`concurrency_id="heavy"`, `Settings.heavy_lane_limit` at
a time, Gradio's hard limit `Settings.<m.limit>_time_limit_s`), and around each run: the work
budget (a refusal through the one error path, `feedback.guarded`), taking turns with the server
(`guarded(alone=ctx.server)`), the busy check (`measurement.watched`), the time limit
(`measurement.timed`) and sharing identical runs (`ctx.runs`, `classroom.shared_runs`, where
the classroom layer tagged the event as it joined).
The wired handler carries its `Measurement`, so the queue's check and the budget test read the
declarations from the built app (`declared`).
"""
from __future__ import annotations

import functools

import gradio as gr
from gradio.events import Dependency

from inference.errors import WorkOverBudgetError

from .feedback import guarded
from .measurement import HEAVY, Measurement, Outcome, measurement_of, timed, watched

SPECIAL = (gr.Request, gr.EventData)  # what Gradio adds to a handler's arguments, not inputs


def wire_measurement(button, inputs, outputs: list, m: Measurement, ctx) -> Dependency:
    """Wire `m` to `button` (a gr.Button, or an event to run it after: `.then`)."""
    listen = button.then if isinstance(button, Dependency) else button.click
    s = ctx.settings
    return listen(measured(m, ctx, outputs), inputs, outputs, api_name=m.name,
                  concurrency_id=m.lane,
                  concurrency_limit=s.heavy_lane_limit if m.lane == HEAVY else "default",
                  time_limit=getattr(s, f"{m.limit}_time_limit_s"))


def measured(m: Measurement, ctx, outputs: list):
    """The handler Gradio calls for `m`: budget, turns, time limit and sharing."""
    settings, runs, device = ctx.settings, ctx.runs, ctx.lm.device
    annotate = functools.partial(with_sentence, first_markdown(outputs))

    def checked(outcome: Outcome, *args, **kwargs):  # the run's first job (guarded words it)
        # the inputs' values: Gradio passes a handler's gr.Request among them, by position
        refusal = m.over_budget(settings, *(a for a in args if not isinstance(a, SPECIAL)))
        if refusal is not None:
            raise WorkOverBudgetError(refusal)
        return watched(m.run(*args, **kwargs), device, outcome)
    steps = guarded(checked, alone=ctx.server)

    @functools.wraps(m.run)
    def run(*args, **kwargs):
        outcome = Outcome()

        def start():
            return timed(steps(outcome, *args, **kwargs), settings.measure_limit_s, annotate,
                         outcome)
        yield from start() if runs is None else runs.run(start, annotate, outcome)
    run.measurement = m
    return run


def declared(demo: gr.Blocks) -> dict[str, tuple]:
    """Every measurement wired in `demo`: name -> (its event's block function, Measurement)."""
    return {m.name: (fn, m) for fn in demo.fns.values()
            if (m := measurement_of(fn)) is not None}


def first_markdown(outputs: list):
    """(index, component) of the first Markdown output (a run's progress line), or None."""
    return next(((i, c) for i, c in enumerate(outputs) if isinstance(c, gr.Markdown)), None)


def with_sentence(markdown, frame, sentence: str):
    """`frame` with `sentence` shown above its Markdown output's text (or as a toast)."""
    if markdown is None:
        gr.Warning(sentence.replace("*", ""))
        return frame
    index, component = markdown
    if isinstance(frame, dict):
        return {**frame, component: _above(sentence, frame.get(component))}
    if isinstance(frame, (tuple, list)):
        values = list(frame)
        values[index] = _above(sentence, values[index])
        return tuple(values)
    return _above(sentence, frame) if index == 0 else frame


def _above(sentence: str, old) -> str:
    text = old.get("value") if isinstance(old, dict) else old
    return sentence if not isinstance(text, str) or not text else f"{sentence}\n\n{text}"
