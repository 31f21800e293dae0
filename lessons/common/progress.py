"""The path through the lessons (`lessons.TABS`): under each lesson its words and a "Next
lesson" button; each lesson opened is ticked on "Start here" (kept in the visitor's browser,
`gr.BrowserState`) and the first not yet opened suggested next. Tab and Next clicks scroll to
the lesson's start; a linked glossary term opens the Glossary tab at its entry."""
from __future__ import annotations

import gradio as gr

from visualizations.glossary import lesson_words_md

from .. import BY_ID, TABS
from .lesson_text import lesson_text

STORAGE_KEY = "llm-lab-progress"
# The lessons in order, with their tab labels (every tab some "Next lesson" button opens).
STEPS: dict[str, str] = {t.id: t.label for t in TABS if t.id in {s.next for s in TABS}}


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


# After a tab or "Next lesson" click, scroll up to the tabs (Gradio's scroll_to_output aims at
# the sticky strip, always "in view"); a term's link (`?lesson=glossary#gl-<key>`) opens the
# Glossary at its entry; on a phone, the open tab is kept in the strip.
SCROLL_JS = lesson_text("lesson_scroll.js")


def wire_scroll(demo: gr.Blocks) -> None:
    demo.load(None, None, None, js=SCROLL_JS, queue=False, api_visibility="private")
