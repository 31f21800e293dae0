"""A learner's path through the lessons, remembered in their own browser (`gr.BrowserState`,
nothing kept on the server): every lesson tab they open is ticked on "Start here", and the
first one not yet opened is suggested next. `visit` and `path_md` are pure."""
from __future__ import annotations

import gradio as gr

from .. import BY_ID, TABS

STORAGE_KEY = "llm-lab-progress"
# The lessons in order, with their tab labels (every tab some "Next lesson" button opens).
STEPS: dict[str, str] = {t.id: t.label for t in TABS if t.id in {s.next for s in TABS}}


def visited(stored) -> list[str]:
    """The lesson ids in a stored record, in lesson order; anything else is dropped (the
    record comes from the visitor's browser, so it may hold anything)."""
    seen = stored.get("visited") if isinstance(stored, dict) else None
    seen = set(seen) if isinstance(seen, list) else set()
    return [tab for tab in STEPS if tab in seen]


def visit(stored, tab_id: str) -> dict:
    """The record after opening `tab_id` (unchanged for a tab that is not a lesson)."""
    return {"visited": visited({"visited": visited(stored) + [tab_id]})}


def path_md(stored) -> str:
    """One line: each lesson ticked or not, and which to open next."""
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
    """Tick a lesson when its tab is opened (by a tap, or by a "Next lesson" button, which
    switches tabs without a tap); redraw the line when the browser restores the record."""
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
