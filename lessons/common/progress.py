"""How a learner moves through the lessons (`lessons.TABS`): each lesson's opening, the rest under
"Read more", its words and a "Next lesson" button; on "Start here" the path, each lesson opened
ticked (kept in the visitor's browser) and the next suggested. Links open a prepared state
(`?lesson=kv&prompt=Why+is+the+sky+blue%3F`, `?present=1`); whatever the app cannot honour is
left out with a visible notice: a link never raises an error."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import gradio as gr

from visualizations.glossary import lesson_words_md

from .. import BY_ID, TABS
from .lesson_text import split_more

STORAGE_KEY = "llm-lab-progress"
LESSONS = tuple(t.id for t in TABS)
# The lessons in order, with their tab labels (every tab some "Next lesson" button opens).
STEPS: dict[str, str] = {t.id: t.label for t in TABS if t.id in {s.next for s in TABS}}
# tab id -> elem_ids of the prompt boxes a link fills (the lesson's own main prompt first)
PROMPT_BOXES: dict[str, tuple[str, ...]] = {t.id: t.prompt_boxes for t in TABS if t.prompt_boxes}
PRESENT_TAB = "present"
TRUE_WORDS = ("1", "true", "yes", "on")
SHOWN_CHARS = 40  # an unknown lesson name is quoted at most this long in the notice
FILLED_INFO = "The prompt from your teacher's link is filled in (edit it freely)."


def visited(stored) -> list[str]:
    """The lesson ids in a record stored in the browser (anything else dropped), in order."""
    seen = stored.get("visited") if isinstance(stored, dict) else None
    seen = set(seen) if isinstance(seen, list) else set()
    return [tab for tab in STEPS if tab in seen]


def visit(stored, tab_id: str) -> dict:
    """The record after opening `tab_id` (unchanged for a tab that is not a lesson)."""
    return {"visited": visited({"visited": visited(stored) + [tab_id]})}


def path_md(stored) -> str:
    done = visited(stored)
    if not done:
        return ("*Your path: the lessons you open are ticked here, in this browser only "
                "(nothing is stored on the server).*")
    marks = " · ".join(f"{'✓' if tab in done else '○'} {label}" for tab, label in STEPS.items())
    todo = [label for tab, label in STEPS.items() if tab not in done]
    nxt = f" Next: **{todo[0]}**." if todo else " **Every lesson opened.**"
    return (f"**Your path** ({len(done)} of {len(STEPS)}, kept in this browser only): "
            f"{marks}.{nxt}")


def progress_box() -> tuple[gr.BrowserState, gr.Markdown]:
    """The stored record and the line that shows it (call inside "Start here")."""
    store = gr.BrowserState({"visited": []}, storage_key=STORAGE_KEY)
    return store, gr.Markdown(path_md(None), elem_id="start-progress")


def wire_progress(demo: gr.Blocks, store: gr.BrowserState, box: gr.Markdown) -> None:
    """Tick a lesson when its tab is opened (tapped, or by a "Next lesson" button)."""
    def opened(tab_id: str):
        def tick(stored) -> tuple[dict, str]:
            record = visit(stored, tab_id)
            return record, path_md(record)
        return tick

    for block in list(demo.blocks.values()):
        if isinstance(block, gr.Tab) and block.id in STEPS:
            block.select(opened(block.id), store, [store, box], queue=False,
                         api_visibility="private")
        if isinstance(block, gr.Button) and (block.elem_id or "").startswith("next-"):
            nxt = BY_ID[block.elem_id.removeprefix("next-")].next
            block.click(opened(nxt), store, [store, box], queue=False, api_visibility="private")
    # The browser restores the stored record after load and reports it as a change: redraw
    # the line only (writing the record back would report again).
    store.change(path_md, store, box, queue=False, api_visibility="private",
                 show_progress="hidden")


def lesson_markdown(page: str, elem_id: str | None = None) -> gr.Markdown:
    """Render `page` (a `lesson_page(...)`) as its opening, then "Read more" (closed) holding
    the rest (split at `lesson_text.READ_MORE`); returns the opening's Markdown."""
    opening, rest = split_more(page)
    shown = gr.Markdown(opening, elem_id=elem_id)
    if rest:
        with gr.Accordion("Read more", open=False,
                          elem_id=f"{elem_id}-more" if elem_id else None):
            gr.Markdown(rest)
    return shown


def lesson_footer(tab_id: str, tabs: gr.Tabs) -> None:
    """The words of lesson `tab_id` and its "next lesson" button (call inside its tab)."""
    tab = BY_ID[tab_id]
    with gr.Accordion("Words in this lesson", open=False, elem_classes=["lab-words"]):
        gr.Markdown(lesson_words_md(list(tab.words)) + "\n\nAll of them: the **Glossary** tab.")
    if tab.next is None:
        gr.Markdown("**That was the last lesson.** Go back to any tab above to run it again, or "
                    "read the **Glossary**.", elem_classes=["lab-next"])
        return
    nxt = BY_ID[tab.next]
    button = gr.Button(f"Next lesson → {nxt.label}: {nxt.teaser}", variant="secondary",
                       elem_id=f"next-{tab_id}", elem_classes=["lab-next"])
    button.click(lambda: gr.Tabs(selected=nxt.id), None, tabs, scroll_to_output=True,
                 queue=False, api_visibility="private")


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
