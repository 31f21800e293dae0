"""Exports: every chart's "Data as CSV" button (in the browser, from the points it draws), a
CSV download under the prefill and batch sweeps (with what the chart does not draw, such as
extrapolated flags) and the copyable figures box on This machine. The sweeps' points are also
kept in `SharedResults` (`latest`), so the machine's summary quotes the latest, whoever ran them.
"""
from __future__ import annotations

import gradio as gr

from inference.config import LIMITS
from visualizations.exports import batch_sweep_csv, prefill_sweep_csv, write_csv

from .feedback import guarded
from .latest import LAST_BATCH, LAST_PREFILL, figures_md, shared_key
from .lesson_text import lesson_text

KEPT = LIMITS.export_files_kept  # CSV files kept in the process's one export folder


def _csv_button(elem_id: str, event, inputs, fill) -> None:
    """A chart's CSV download, hidden until `event` finishes and `fill(*inputs)` gives a file."""
    button = gr.DownloadButton("⬇ Chart data (CSV)", visible=False, size="sm", elem_id=elem_id)
    event.then(guarded(fill, plain=True, compute=False), inputs, button, api_visibility="private")


def wire_prefill_csv(lm, shared, event, lengths, most) -> None:
    """The prefill sweep's finished points (put in `shared` by `run_prefill_sweep`) as CSV;
    hidden when the sweep was stopped before the end."""
    def fill(chosen: list[int], most_tokens: int) -> gr.DownloadButton:
        key = ("prefill_sweep", tuple(sorted({int(n) for n in chosen}) or [8, 32, 128]),
               int(most_tokens))
        points = shared.get(key) if shared is not None else None
        if not points:
            return gr.DownloadButton(visible=False)
        shared.put(shared_key(lm, LAST_PREFILL), tuple(points))
        return gr.DownloadButton(value=write_csv(prefill_sweep_csv(points), "prefill-sweep", KEPT),
                                 visible=True)
    _csv_button("prefill-csv", event, [lengths, most], fill)


def wire_batch_csv(lm, shared, event, sweep_state) -> None:
    """The batch sweep's finished points (the panel's state) as a CSV file."""
    def fill(sweep) -> gr.DownloadButton:
        if sweep is None or not getattr(sweep, "finished", False) or not sweep.points:
            return gr.DownloadButton(visible=False)
        if shared is not None:
            shared.put(shared_key(lm, LAST_BATCH), tuple(sweep.points))
        return gr.DownloadButton(value=write_csv(batch_sweep_csv(sweep.points), "batch-sweep",
                                                 KEPT), visible=True)
    _csv_button("batch-csv", event, sweep_state, fill)


def figures_box(lm, shared) -> gr.Code:
    return gr.Code(figures_md(lm, shared), language="markdown", interactive=False,
                   buttons=["copy", "download"], elem_id="perf-figures",
                   label="This machine's figures (markdown: copy into your notes or slides)")


CSV_JS = lesson_text("chart_csv.js")  # a "Data as CSV" button on every chart it finds


def wire_chart_csv(demo: gr.Blocks) -> None:
    """Give every chart on the page its CSV button (installed once, when the page loads)."""
    demo.load(None, None, None, js=CSV_JS, queue=False, api_visibility="private")
