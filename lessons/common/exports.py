"""What a class takes away: every chart's "Data as CSV" button (in the browser), a CSV download
under the prefill and batch sweeps (with what the chart does not draw), the copyable figures box
on This machine, and the teacher's guide (assets/teachers_guide.md) folded on Present and Start
here, printable alone, this machine's quiet reference figures under it. A finished sweep's points
become this machine's latest (`latest`), quoted in its figures whoever ran them.
"""
from __future__ import annotations

import gradio as gr

from inference.config import LIMITS
from inference.experiments import quiet_reference
from visualizations.exports import batch_sweep_csv, prefill_sweep_csv, write_csv

from .feedback import guarded
from .latest import LAST_BATCH, LAST_PREFILL, figures_md, keep_latest
from .lesson_text import lesson_text

KEPT = LIMITS.export_files_kept  # CSV files kept in the process's one export folder
GUIDE = "teachers_guide.md"
GUIDE_LABEL = "Teacher's guide: every Present screen, what to say, expected answers"


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
        keep_latest(lm, shared, LAST_PREFILL, points)
        return gr.DownloadButton(value=write_csv(prefill_sweep_csv(points), "prefill-sweep", KEPT),
                                 visible=True)
    _csv_button("prefill-csv", event, [lengths, most], fill)


def wire_batch_csv(lm, shared, event, sweep_state) -> None:
    """The batch sweep's finished points (the panel's state) as a CSV file."""
    def fill(sweep) -> gr.DownloadButton:
        if sweep is None or not getattr(sweep, "finished", False) or not sweep.points:
            return gr.DownloadButton(visible=False)
        keep_latest(lm, shared, LAST_BATCH, sweep.points)
        return gr.DownloadButton(value=write_csv(batch_sweep_csv(sweep.points), "batch-sweep",
                                                 KEPT), visible=True)
    _csv_button("batch-csv", event, sweep_state, fill)


def figures_box(lm, shared) -> gr.Code:
    return gr.Code(figures_md(lm, shared), language="markdown", interactive=False,
                   buttons=["copy", "download"], elem_id="perf-figures",
                   label="This machine's figures (markdown: copy into your notes or slides)")


def quiet_reference_md(refs: dict | None = None) -> str:
    """This machine's quiet reference, one line a figure ("" when it has none yet)."""
    refs = quiet_reference.read() if refs is None else refs
    if not refs:
        return ""
    lines = [f"- **{r.key}**: {r.label} (measured on this machine at {r.when()}, quiet)"
             for r in refs.values()]
    return ("\n\n## This machine's quiet reference\nThe first quiet run of each headline "
            "figure on this machine, kept on disk:\n\n" + "\n".join(lines))


def guide_md() -> str:
    return lesson_text(GUIDE) + quiet_reference_md()


def teachers_guide(elem_id: str) -> None:
    """The guide, folded, inside the caller's layout; `elem_id` names its accordion."""
    with gr.Accordion(GUIDE_LABEL, open=False, elem_id=elem_id, elem_classes=["lab-guide"]):
        body = elem_id + "-text"
        gr.Markdown(guide_md(), elem_id=body)
        # the guide alone in a new window, then the browser's print dialog
        print_js = lesson_text("print_guide.js", extra={"text_id": body})
        gr.Button("Print the guide", size="sm", elem_id=elem_id + "-print").click(
            None, None, None, js=print_js, queue=False, api_visibility="private")
