"""The teacher's guide (assets/teachers_guide.md: every Present screen, what to say, a 45- and a
15-minute plan), folded on Present and Start here with a button that prints it alone, and under
it this machine's quiet reference figures (`quiet_reference`)."""
from __future__ import annotations

import gradio as gr

from inference.experiments import quiet_reference

from .lesson_text import lesson_text

GUIDE = "teachers_guide.md"
LABEL = "Teacher's guide: every Present screen, what to say, expected answers"


def print_js(text_id: str) -> str:
    """The guide alone in a new window, then the browser's print dialog."""
    return f"""() => {{
  const md = document.querySelector('#{text_id} .prose');
  const w = window.open('', '_blank');
  if (!md || !w) return;
  w.document.write('<!doctype html><title>Teacher guide</title><style>body{{font:14px/1.45 ' +
    'system-ui,sans-serif;max-width:46em;margin:2em auto}}h2{{break-after:avoid}}</style>' +
    md.innerHTML);
  w.document.close(); w.focus(); w.print();
}}"""


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
    with gr.Accordion(LABEL, open=False, elem_id=elem_id, elem_classes=["lab-guide"]):
        body = elem_id + "-text"
        gr.Markdown(guide_md(), elem_id=body)
        gr.Button("Print the guide", size="sm", elem_id=elem_id + "-print").click(
            None, None, None, js=print_js(body), queue=False, api_visibility="private")
