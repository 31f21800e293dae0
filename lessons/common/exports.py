"""Exports wired into the lessons: a "CSV of this chart" download under the prefill and batch
sweeps, and the "copy this machine's figures" box on This machine. The text itself is built
by the pure functions in `visualizations.exports` from the same records the charts draw.

A finished sweep's points are also kept in the app's `SharedResults` (`latest`), so the
machine's summary can quote the latest sweeps whoever ran them. Each panel adds two or three
lines to use these.
"""
from __future__ import annotations

import gradio as gr

from inference.config import LIMITS
from visualizations.exports import batch_sweep_csv, prefill_sweep_csv, write_csv

from .feedback import guarded
from .latest import LAST_BATCH, LAST_PREFILL, figures_md, shared_key

KEPT = LIMITS.export_files_kept  # CSV files kept in the process's one export folder


def csv_button(elem_id: str) -> gr.DownloadButton:
    """A download button for a chart's data, hidden until the chart has finished data."""
    return gr.DownloadButton("⬇ Chart data (CSV)", visible=False, size="sm", elem_id=elem_id)


def prefill_csv(lm, shared, lengths: list[int], most: int) -> gr.DownloadButton:
    """After the prefill sweep: its finished points (from `shared`, where `run_prefill_sweep` put
    them) as a CSV file behind the button; hidden when the sweep was stopped before the end."""
    key = ("prefill_sweep", tuple(sorted({int(n) for n in lengths}) or [8, 32, 128]), int(most))
    points = shared.get(key) if shared is not None else None
    if not points:
        return gr.DownloadButton(visible=False)
    shared.put(shared_key(lm, LAST_PREFILL), tuple(points))
    return gr.DownloadButton(value=write_csv(prefill_sweep_csv(points), "prefill-sweep", KEPT),
                             visible=True)


def batch_csv(lm, shared, sweep) -> gr.DownloadButton:
    """After the batch sweep: the finished sweep's points (the panel's state) as a CSV file."""
    if sweep is None or not getattr(sweep, "finished", False) or not sweep.points:
        return gr.DownloadButton(visible=False)
    if shared is not None:
        shared.put(shared_key(lm, LAST_BATCH), tuple(sweep.points))
    return gr.DownloadButton(value=write_csv(batch_sweep_csv(sweep.points), "batch-sweep", KEPT),
                             visible=True)


def wire_prefill_csv(lm, shared, event, lengths, most) -> None:
    """A CSV button under the prefill sweep, filled when the sweep `event` finishes."""
    button = csv_button("prefill-csv")
    event.then(guarded(lambda n, m: prefill_csv(lm, shared, n, m), plain=True,
                       compute=False), [lengths, most],
               button, api_visibility="private")


def wire_batch_csv(lm, shared, event, sweep_state) -> None:
    """A CSV button under the batch sweep, filled when the sweep `event` finishes."""
    button = csv_button("batch-csv")
    event.then(guarded(lambda s: batch_csv(lm, shared, s), plain=True, compute=False),
               sweep_state, button, api_visibility="private")


def figures_box(lm, shared) -> gr.Code:
    """The copyable markdown summary (its copy button is in the corner)."""
    return gr.Code(figures_md(lm, shared), language="markdown", interactive=False,
                   buttons=["copy", "download"], elem_id="perf-figures",
                   label="This machine's figures (markdown: copy into your notes or slides)")
