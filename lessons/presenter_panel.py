"""Presenter mode: the whole story (tokens → prefill → decode → KV cache → batching →
quantization → cost), one idea per screen in large type, each with a button that measures it
live; on `predict:` screens the room guesses first. Next/Back or the arrow keys; `?present=1`
opens it. The visitor's progress lives in their browser (`gr.BrowserState`): a reload resumes."""
from __future__ import annotations

from collections.abc import Iterator

import gradio as gr

from visualizations.cards import recap_html, result_html, screen_md, step_html
from visualizations.style import info_caption

from . import presenter_handlers as handlers
from . import presenter_record as record
from .common.context import AppContext
from .common.exports import teachers_guide
from .common.feedback import guarded
from .common.lesson_text import lesson_text
from .common.measurement import Measurement
from .common.measurement_wiring import wire_measurement
from .common.predictions import load_screens

STORAGE_KEY = "llm-lab-presenter"
# Arrow keys / Page Up-Down click Back and Next when no field has the focus. Presenting
# (`?present=1`, or the Present tab) hides the page's chrome (assets/presenter.css), so a
# projector at 150% zoom (853×480) shows title, button and number at once; Esc brings it back.
KEYS_JS = lesson_text("presenter_keys.js")
# Moves in order: each waits until every earlier move's answer is drawn (MOVE_JS), released by
# ANSWERED_JS; both are defined by KEYS_JS.
MOVE_JS = lesson_text("presenter_move.js")
ANSWERED_JS = lesson_text("presenter_answered.js")
# Pressed, the button draws a "sent" line at once, in the browser: the run's first frame waits
# for a turn on the model's thread, seconds on a busy machine. The run's own lines replace it.
SENT_JS = lesson_text("presenter_sent.js")


def build(ctx: AppContext) -> None:
    """The presenter inside the caller's tab (`ctx.demo` binds the keys on load)."""
    lm, settings, shared, demo = ctx.lm, ctx.settings, ctx.shared, ctx.demo
    screens = load_screens(lm.info)
    progress = gr.BrowserState(record.fresh(), storage_key=STORAGE_KEY)
    with gr.Column(elem_id="presenter"):
        shown = gr.Markdown(screen_md(screens[0], 0, len(screens)), elem_id="present-screen")
        with gr.Row(elem_id="present-act", equal_height=True):  # one row: fits 853×480
            guess = gr.Number(None, label="Your guess", visible=False, scale=3,
                              elem_id="present-guess")
            run = gr.Button(screens[0].button, variant="primary", scale=2, elem_id="present-run")
        # the payoff (guess against measurement, and why) above the number: both fit 853×480
        compare = gr.Markdown(elem_id="present-compare", visible=False)
        result = gr.HTML(result_html(None), elem_id="present-result")
        gr.Markdown(info_caption(lm.info), elem_id="present-machine",
                    elem_classes=["present-machine"])
        with gr.Row(elem_id="present-nav"):
            back = gr.Button("← Back", elem_id="present-back")
            forward = gr.Button("Next →", elem_id="present-next")
        gr.HTML("← → turn the page · <button class='lab-present-exit'>Show the tabs "
                "(Esc)</button>", elem_id="present-hint")
        teachers_guide("present-guide")

    def view(p: dict) -> dict:
        i = record.screen_index(screens, p)
        s = screens[i]
        ask = s.predict is not None
        results = p["results"]
        payoff = record.compare_text(s, p)
        recap = s.measure == handlers.RECAP and handlers.RECAP in results
        number = (recap_html(record.recap_figures(screens, results, lm.bytes_per_value)) if recap
                  else result_html(record.shown_result(s.measure, results)))
        return {progress: p, shown: screen_md(s, i, len(screens), compact=bool(payoff) or recap),
                guess: gr.Number(value=p["guesses"].get(s.measure), visible=ask,
                                 label=f"Your guess first: {s.predict} ({s.unit.strip()})"
                                 if ask else "Your guess"),
                run: gr.Button(s.button), result: number,
                compare: gr.Markdown(payoff, visible=bool(payoff))}

    def move(step: int):
        def go(p, request: gr.Request = None) -> dict:
            p = record.clean(p)
            p["page"] = record.page_id(request)
            # from this page's own moves: the stored progress can lag behind a measurement
            here = turned.now(p["page"], p["screen"])
            p["screen"] = min(max(here + step, 0), len(screens) - 1)
            turned.moved(p["page"], p["screen"])
            return view(p)
        return go

    def measure(p, typed: float | None, request: gr.Request = None) -> Iterator[dict]:
        p = record.clean(p)
        p["page"] = record.page_id(request)
        measuring = record.screen_index(screens, p)
        for done in handlers.measure_screen_steps(p, screens, typed, lm, settings, shared):
            if done is None or isinstance(done, handlers.Step):  # between two parts
                still = done is not None and turned.now(p["page"], measuring) == measuring
                yield {result: step_html(done) if still else gr.skip()}  # on its own screen only
            else:
                yield {finished: done}  # shown by `show_finished`, once this event has ended

    def show_finished(done, request: gr.Request = None) -> dict:
        """The finished measurement, on the screen this page shows now. A separate event: at a
        stream's end Gradio resends its last values, which could undo a move made just before."""
        if not isinstance(done, dict):  # nothing finished (stopped at its time limit)
            return {c: gr.skip() for c in outputs} | {finished: None}
        done = record.clean(done)
        done["page"] = record.page_id(request)  # a followed run carries its leader's page
        done["screen"] = turned.now(done["page"], done["screen"])
        return view(done) | {finished: None}  # used once: a later run's end can't replay it

    outputs = [progress, shown, guess, run, result, compare]
    finished = gr.State(None)  # a measurement's progress, from its run to `show_finished`
    turned = record.PageScreens(settings.sessions_held)  # each page's newest screen, by its moves
    # always_last: a press while the previous move is on its way runs after it (not dropped)
    for button, step in ((back, -1), (forward, +1)):
        button.click(guarded(move(step), plain=True, compute=False), progress, outputs,
                     js=MOVE_JS, queue=False, api_visibility="private",
                     trigger_mode="always_last").then(
            None, None, None, js=ANSWERED_JS, queue=False, api_visibility="private")
    run.click(None, None, None, js=SENT_JS, queue=False, api_visibility="private")

    def work(p, typed: float | None) -> int:  # what the screen's button feeds (its budget)
        i = record.screen_index(screens, record.clean(p))
        return handlers.screen_tokens(lm, settings, screens[i].measure)

    wire_measurement(run, [progress, guess], outputs + [finished],
                     Measurement("presenter_measure", measure, work=work), ctx).success(
        guarded(show_finished, plain=True, compute=False), finished, outputs + [finished],
        queue=False, api_visibility="private", show_progress="hidden")
    # The browser restores the stored progress after load as a change: show that screen (not
    # writing `progress` back). A change this page wrote itself is already shown: redrawing it
    # could land after the next move and put the old screen back.
    def restore(p, request: gr.Request = None) -> dict:
        p = record.clean(p)
        if p["page"] is not None and p["page"] == record.page_id(request):
            return {c: gr.skip() for c in outputs[1:]}
        shown_now = view(p)
        shown_now.pop(progress)
        return shown_now

    progress.change(guarded(restore, plain=True, compute=False), progress, outputs[1:], queue=False,
                    api_visibility="private", show_progress="hidden")
    if demo is not None:
        demo.load(None, None, None, js=KEYS_JS, queue=False, api_visibility="private")
