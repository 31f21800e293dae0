"""The one way a heavy button is wired: `wire_measurement(button, inputs, outputs, m, ctx)`.

It clicks `m.run` in the heavy lane (Gradio's `time_limit` is passed too, though Gradio enforces
it only on `.stream` events: the limit that stops a run is `measurement.timed`) and wraps each
run in the work budget (refused through `feedback.guarded`), turns with the server
(`guarded(alone=ctx.server)`), the busy check (`watched`), the time limit and shared identical
runs (`ctx.runs`, `classroom.shared_runs`). With the app's shared runs, the measurement line
(`measure_line`) decides who runs: until its turn a press's first frames are its place and an
estimated wait (`IN_LINE`, in its first Markdown output); a long line runs its class-sized
variant (`SMALLER`); a full one refuses it (`LINE_FULL`); a press whose visitor leaves while it
waits runs nothing. The wired handler carries its `Measurement`, so the queue's check and the
budget test read the declarations from the built app (`declared`).
"""
from __future__ import annotations

import functools
from collections.abc import Iterator

import gradio as gr
from gradio.events import Dependency

from inference.errors import ServerBusyError, WorkOverBudgetError

from .feedback import guarded, user_error
from .measure_line import LineFull, estimate
from .measurement import HEAVY, SMALLER, Measurement, Outcome, measurement_of, timed, watched

SPECIAL = (gr.Request, gr.EventData)  # what Gradio adds to a handler's arguments, not inputs
IN_LINE = ("⏳ **Your measurement is {where}.** Measurements take turns on this machine, so "
           "each is timed without the others; this message updates as the line moves (Stop "
           "leaves the line).")
YOUR_TURN = "▶ **Your turn: measuring now.**"
LINE_FULL = ("The measurement line is full ({n} waiting for this machine, which takes them in "
             "turn). Try again {when}; a press identical to one in line joins it instead of "
             "waiting.")


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
    """The app's measurement line for a heavy `m` (`lessons.common.measure_line`), or None."""
    line_for = getattr(ctx.runs, "line_for", None)
    return line_for(ctx.settings) if m.lane == HEAVY and line_for is not None else None


def measured(m: Measurement, ctx, outputs: list):
    """The handler Gradio calls for `m`: budget, turns, time limit and sharing."""
    settings, runs, device = ctx.settings, ctx.runs, ctx.lm.device
    markdown = first_markdown(outputs)
    annotate = functools.partial(with_sentence, markdown)
    line = _line(m, ctx)

    def checked(outcome: Outcome, *args, **kwargs):  # the run's first job (guarded words it)
        # the inputs' values: Gradio passes a handler's gr.Request among them, by position
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


class Turn:
    """One press's passage through the measurement line: its ticket, the arguments it runs
    (its class-sized variant's, when the line was long) and what it says about them."""

    def __init__(self, args: tuple) -> None:
        self.args, self.ticket, self.note, self.waited = args, None, None, False

    def wait(self, line, m: Measurement, tell, say) -> Iterator:
        """Join `line`; until this press's turn, its place (`say`: a frame showing a sentence),
        also told to its followers (`tell`). Closed before its turn, it leaves the line."""
        values = [a for a in self.args if not isinstance(a, SPECIAL)]
        smaller, work = self._smaller(m, values), _work(m, values)
        try:
            self.ticket = line.join(m.title, work, None if smaller is None else smaller[1])
        except LineFull as full:
            raise user_error(ServerBusyError(LINE_FULL.format(n=full.waiting, when=(
                "in " + estimate(full.retry_s) if full.retry_s is not None
                else "when the measurement running now has finished")))) from full
        if self.ticket.small:
            self.args = _with_values(self.args, smaller[0])
            self.note = SMALLER.format(what=smaller[2])
        try:
            for place in line.turn(self.ticket):
                self.waited = True
                tell(place.sentence())
                yield say(IN_LINE.format(where=place.sentence()))
        except BaseException:
            line.done(self.ticket)
            raise

    @staticmethod
    def _smaller(m: Measurement, values: list) -> tuple | None:
        """(its arguments, their work, what changed) for the class-sized variant, or None."""
        if m.smaller is None:
            return None
        try:
            args, what = m.smaller(*values)
            work = _work(m, list(args))
            return (tuple(args), work, what) if 0 < work < _work(m, values) else None
        except Exception:  # noqa: BLE001 - arguments the handler itself will refuse, worded
            return None

    def noted(self, frames: Iterator, markdown, line, outcome: Outcome) -> Iterator:
        """The run's frames, after 'your turn' when it waited, with its class-size note above
        every frame that shows its Markdown output; its place in `line` is given up as it ends
        (a whole run, neither cut nor stopped, times this measurement on this machine)."""
        whole = False
        try:
            if markdown is not None and (self.waited or self.note):
                yield {markdown[1]: " ".join(filter(None, (YOUR_TURN, self.note)))}
            for frame in frames:
                shows = markdown is not None and (not isinstance(frame, dict)
                                                  or markdown[1] in frame)
                yield with_sentence(markdown, frame, self.note) if self.note and shows else frame
            whole = not outcome.cut
        finally:
            frames.close()
            if self.ticket is not None:
                line.done(self.ticket, whole)


def _work(m: Measurement, values: list) -> int:
    """`m`'s work for these values (0 when they are wrong: the handler's check words it)."""
    try:
        return int(m.work(*values))
    except Exception:  # noqa: BLE001 - the run's own budget check raises it, worded
        return 0


def _with_values(args: tuple, values: tuple) -> tuple:
    """`args` with its input values replaced in order (Gradio's special arguments kept)."""
    given = iter(values)
    return tuple(a if isinstance(a, SPECIAL) else next(given) for a in args)


def said(markdown, outputs: list, sentence: str):
    """A frame showing only `sentence` in the first Markdown output (nothing else changes)."""
    if markdown is None:
        return gr.skip() if len(outputs) == 1 else tuple(gr.skip() for _ in outputs)
    return {markdown[1]: sentence}


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
