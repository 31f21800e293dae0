"""Links to a prepared state: `?lesson=kv&prompt=Why+is+the+sky+blue%3F` opens that lesson with
its prompt boxes filled (each saying so, `FILLED_INFO`); `?present=1` opens the presenter.
Whatever the app cannot honour is left out with a visible notice: a link never raises an error.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import gradio as gr

from .. import TABS

LESSONS = tuple(t.id for t in TABS)
# tab id -> elem_ids of the prompt boxes a link fills (the lesson's own main prompt first)
PROMPT_BOXES: dict[str, tuple[str, ...]] = {t.id: t.prompt_boxes for t in TABS if t.prompt_boxes}
PRESENT_TAB = "present"
TRUE_WORDS = ("1", "true", "yes", "on")
SHOWN_CHARS = 40  # an unknown lesson name is quoted at most this long in the notice
# Under the label of each box a link filled
FILLED_INFO = "The prompt from your teacher's link is filled in (edit it freely)."


@dataclass(frozen=True)
class LinkState:
    """What a link asks for, checked, and a notice for whatever was left out."""

    tab: str | None = None
    prompt: str | None = None
    boxes: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()

    @property
    def notice_md(self) -> str:
        return "\n".join(f"ℹ️ {n}" for n in self.notices)


def _quoted(text: str) -> str:
    """A link's own text, quoted in a code span, where no markdown or HTML is rendered."""
    short = text[:SHOWN_CHARS] + ("…" if len(text) > SHOWN_CHARS else "")
    plain = " ".join(short.replace("`", "'").replace("<", "‹").split()) or "?"  # no ` ends it
    return f"“` {plain} `”"


def read_link(params: Mapping[str, str], max_prompt_chars: int) -> LinkState:
    """Check a page's query parameters: `lesson` (a tab id), `prompt`, `present` (1: presenter).

    >>> read_link({"lesson": "kv", "prompt": "Hi"}, 100).boxes[0]
    'kv-growth-prompt'
    >>> read_link({"lesson": "nope"}, 100).tab is None
    True
    """
    notices: list[str] = []
    lesson = (params.get("lesson") or "").strip().lower()
    prompt = params.get("prompt")
    tab = lesson if lesson in LESSONS else None
    if lesson and tab is None:
        notices.append(f"This link names a lesson {_quoted(lesson)} that does not exist, so "
                       "the app opened as usual. Lessons: " + ", ".join(LESSONS) + ".")
    if str(params.get("present", "")).strip().lower() in TRUE_WORDS:
        tab = PRESENT_TAB
    boxes: tuple[str, ...] = ()
    if prompt and len(prompt) > max_prompt_chars:
        notices.append(f"The link's prompt is {len(prompt):,} characters, over this app's "
                       f"limit of {max_prompt_chars:,}, so it was left out.")
    elif prompt and tab in PROMPT_BOXES:
        boxes = PROMPT_BOXES[tab]
    elif prompt:
        where = f"the {_quoted(tab)} screen" if tab else "no lesson"
        notices.append(f"The link gives a prompt for {where}, which has no prompt box, so "
                       "it was left out. Prompts go with: " + ", ".join(PROMPT_BOXES) + ".")
    return LinkState(tab, prompt if boxes else None, boxes, tuple(notices))


def link_notice() -> gr.Markdown:
    return gr.Markdown("", visible=False, elem_id="link-notice")


def wire_links(demo: gr.Blocks, tabs: gr.Tabs, notice: gr.Markdown, max_prompt_chars: int
               ) -> None:
    """On page load, open the linked tab and fill its prompt boxes (call after every tab is
    built: the boxes are found by elem_id)."""
    found = {b.elem_id: b for b in demo.blocks.values() if getattr(b, "elem_id", None)}
    boxes = {b: found[b] for ids in PROMPT_BOXES.values() for b in ids if b in found}

    def on_load(request: gr.Request) -> dict:
        params = dict(request.query_params) if request is not None else {}
        state = read_link(params, max_prompt_chars)
        out: dict = {notice: gr.Markdown(state.notice_md, visible=bool(state.notices))}
        if state.tab is not None:
            out[tabs] = gr.Tabs(selected=state.tab)
        return out | {boxes[elem_id]: gr.update(value=state.prompt, info=FILLED_INFO)
                      for elem_id in state.boxes if elem_id in boxes}

    demo.load(on_load, None, [notice, tabs, *boxes.values()], queue=False,
              api_visibility="private", show_progress="hidden")
