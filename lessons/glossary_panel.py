"""The Glossary tab: every term the lessons use, on one page."""
from __future__ import annotations

import gradio as gr

from .common.context import AppContext
from .glossary_handlers import glossary_md


def build(ctx: AppContext) -> None:
    gr.Markdown(glossary_md(), elem_id="glossary")
