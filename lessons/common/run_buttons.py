"""A measurement's run button with its Stop beside it, and the wiring that makes Stop cancel
the run (`wire_measurement` does the rest)."""
from __future__ import annotations

import gradio as gr
from gradio.events import Dependency

from .feedback import guarded
from .measurement import Measurement
from .measurement_wiring import wire_measurement


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
