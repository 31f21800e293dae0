"""The one way a heavy button is wired: `wire_measurement(button, inputs, outputs, m, ctx)`,
with its Stop: `wire_stoppable`. Each run gets the work budget, turns with the server, the busy
check, the time limit, shared identical runs (`classroom.shared_runs`) and the line's place.
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import NamedTuple

import gradio as gr
from gradio.events import Dependency

from inference.errors import ServerBusyError, WorkOverBudgetError

from .feedback import guarded, user_error
from .measurement import HEAVY, SMALLER, LineFull, Measurement, Outcome, timed, watched

SPECIAL = (gr.Request, gr.EventData)  # what Gradio adds to a handler's arguments, not inputs
IN_LINE = ("⏳ **Your measurement is {where}.** Measurements take turns on this machine, each "
           "timed without the others; this message follows the line (Stop leaves it).")
YOUR_TURN = "▶ **Your turn: measuring now.**"
LINE_FULL = ("The measurement line is full ({n} waiting; this machine takes them in turn). "
             "Try again {when}; a press identical to one in line joins it instead of waiting.")


def wire_measurement(button, inputs, outputs: list, m: Measurement, ctx) -> Dependency:
    """Wire `m` to `button` (a gr.Button, or an event to run it after: `.then`)."""
    listen = button.then if isinstance(button, Dependency) else button.click
    s = ctx.settings
    limit = "default"
    if m.lane == HEAVY:  # with a line, it decides who runs; its waiting presses stream
        limit = None if _line(m, ctx) is not None else s.heavy_lane_limit
    return listen(measured(m, ctx, outputs), inputs, outputs, api_name=m.name,
                  concurrency_id=m.lane, concurrency_limit=limit,
                  time_limit=getattr(s, f"{m.limit}_time_limit_s"))


def _line(m: Measurement, ctx):
    line_for = getattr(ctx.runs, "line_for", None)
    return line_for(ctx.settings) if m.lane == HEAVY and line_for is not None else None


def measured(m: Measurement, ctx, outputs: list):
    """The handler Gradio calls for `m`: budget, turns, time limit and sharing."""
    settings, runs, device = ctx.settings, ctx.runs, ctx.lm.device
    markdown = first_markdown(outputs)
    annotate = functools.partial(with_sentence, markdown)
    line = _line(m, ctx)

    def checked(outcome: Outcome, *args, **kwargs):  # the run's first job
        # the inputs' values (Gradio passes a gr.Request among them)
        refusal = m.over_budget(settings, *(a for a in args if not isinstance(a, SPECIAL)))
        if refusal is not None:
            raise WorkOverBudgetError(refusal)
        return watched(m.run(*args, **kwargs), device, outcome)
    steps = guarded(checked, alone=ctx.server)

    @functools.wraps(m.run)
    def run(*args, **kwargs):
        outcome, turn = Outcome(), Turn(args)

        def start():
            frames = timed(steps(outcome, *turn.args, **kwargs), settings.measure_limit_s,
                           annotate, outcome)
            return turn.noted(frames, markdown, line, outcome)

        def queue(tell):
            return turn.wait(line, m, tell, functools.partial(said, markdown, outputs))
        yield from start() if runs is None else runs.run(
            start, annotate, outcome, queue=None if line is None else queue)
    run.measurement = m
    return run


def measurement_of(block_fn) -> Measurement | None:
    """The measurement a wired event runs (marked by `measured` above), or None."""
    return getattr(getattr(block_fn, "fn", None), "measurement", None)


def declared(demo) -> dict[str, tuple]:
    """Every measurement wired in `demo` (a gr.Blocks): name -> (its block function, it)."""
    return {m.name: (fn, m) for fn in demo.fns.values()
            if (m := measurement_of(fn)) is not None}


class Turn:
    """One press's passage through the measurement line: its ticket, the arguments it runs
    (the class-sized variant's, when the line was long) and its note about them."""

    def __init__(self, args: tuple) -> None:
        self.args, self.ticket, self.note, self.waited = args, None, None, False

    def wait(self, line, m: Measurement, tell, say) -> Iterator:
        """Join `line`; until this press's turn, frames of its place (`say`), also told to its
        followers (`tell`). Closed before its turn, it leaves the line."""
        values = [a for a in self.args if not isinstance(a, SPECIAL)]
        work, small, what = _work(m, values), None, ""
        if m.smaller is not None:
            with contextlib.suppress(Exception):  # values the handler refuses, worded there
                small, what = m.smaller(*values)  # its class-sized variant, what changed
        small_work = _work(m, small) if small is not None else 0
        try:
            self.ticket = line.join(m.title, work,
                                    small_work if 0 < small_work < work else None)
        except LineFull as full:
            raise user_error(ServerBusyError(LINE_FULL.format(n=full.waiting,
                                                              when=full.when))) from full
        if self.ticket.small:  # its input values replaced in order, Gradio's own arguments kept
            given = iter(small)
            self.args = tuple(a if isinstance(a, SPECIAL) else next(given) for a in self.args)
            self.note = SMALLER.format(what=what)
        try:
            for place in line.turn(self.ticket):
                self.waited = True
                tell(place.sentence())
                yield say(IN_LINE.format(where=place.sentence()))
        except BaseException:
            line.done(self.ticket)
            raise

    def noted(self, frames: Iterator, markdown, line, outcome: Outcome) -> Iterator:
        """The run's frames, after 'your turn' when it waited, its class-size note above each
        Markdown frame; its place is given up as it ends (a whole run times this machine)."""
        whole = False
        try:
            if markdown is not None and (self.waited or self.note):
                yield {markdown.component: " ".join(filter(None, (YOUR_TURN, self.note)))}
            for frame in frames:
                shows = markdown is not None and (not isinstance(frame, dict)
                                                  or markdown.component in frame)
                yield with_sentence(markdown, frame, self.note) if self.note and shows else frame
            whole = not outcome.cut
        finally:
            frames.close()
            if self.ticket is not None:
                line.done(self.ticket, whole)


def _work(m: Measurement, values: list) -> int:
    """`m`'s work for these values (0 when they are wrong: the handler words that)."""
    try:
        return int(m.work(*values))
    except Exception:  # noqa: BLE001 - the run's own budget check raises it, worded
        return 0


def said(markdown, outputs: list, sentence: str):
    """A frame showing only `sentence` in the first Markdown output (nothing else changes)."""
    if markdown is None:
        return gr.skip() if len(outputs) == 1 else tuple(gr.skip() for _ in outputs)
    return {markdown.component: sentence}


class ProgressLine(NamedTuple):
    """A run's progress line: its first Markdown output, and where it is among the outputs."""

    index: int
    component: gr.Markdown


def first_markdown(outputs: list) -> ProgressLine | None:
    return next((ProgressLine(i, c) for i, c in enumerate(outputs)
                 if isinstance(c, gr.Markdown)), None)


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


def run_and_stop(label: str, run_id: str, stop_id: str | None = None
                 ) -> tuple[gr.Button, gr.Button]:
    """The run button and its Stop, on one line on a phone too (`lab-run-row`, style.css)."""
    with gr.Row(elem_classes=["lab-run-row"]):
        return (gr.Button(label, variant="primary", elem_id=run_id),
                gr.Button("Stop", variant="stop", elem_id=stop_id))


def _clickable(on: bool):
    return guarded(lambda: gr.update(interactive=on), compute=False)


def wire_stoppable(start: gr.Button, stop: gr.Button, inputs, outputs: list, m: Measurement,
                   ctx, lock: bool = False) -> Dependency:
    """`m` run by `start` and cancelled by `stop`. `lock`: `start` is off until the run ends."""
    if not lock:
        ev = wire_measurement(start, inputs, outputs, m, ctx)
        stop.click(None, None, None, cancels=[ev])
        return ev
    off = start.click(_clickable(False), None, start, api_visibility="private")
    ev = wire_measurement(off, inputs, outputs, m, ctx)
    ev.then(_clickable(True), None, start, api_visibility="private")
    stop.click(_clickable(True), None, start, cancels=[ev], api_visibility="private")
    return ev
