"""The teacher's guide (assets/teachers_guide.md: every Present screen, what to say, a 45- and a
15-minute plan), folded on Present and Start here with a button that prints it alone, and under
it this machine's quiet reference figures (`quiet_reference`)."""
from __future__ import annotations

import gradio as gr

from inference.experiments import quiet_reference

from .lesson_text import lesson_text

GUIDE = "teachers_guide.md"
LABEL = "Teacher's guide: every Present screen, what to say, expected answers"


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
        # the guide alone in a new window, then the browser's print dialog
        print_js = lesson_text("print_guide.js", extra={"text_id": body})
        gr.Button("Print the guide", size="sm", elem_id=elem_id + "-print").click(
            None, None, None, js=print_js, queue=False, api_visibility="private")
