"""A lesson's text as its tab shows it: the opening (the idea, at most ~150 words) above the
lesson's first control, the rest folded under "Read more" (split at `lesson_text.READ_MORE`)."""
from __future__ import annotations

import gradio as gr

from .lesson_text import split_more


def lesson_markdown(page: str, elem_id: str | None = None) -> gr.Markdown:
    """Render `page` (a `lesson_page(...)`) as its opening, then "Read more" (closed) holding
    the rest; returns the opening's Markdown."""
    opening, rest = split_more(page)
    shown = gr.Markdown(opening, elem_id=elem_id)
    if rest:
        with gr.Accordion("Read more", open=False,
                          elem_id=f"{elem_id}-more" if elem_id else None):
            gr.Markdown(rest)
    return shown
