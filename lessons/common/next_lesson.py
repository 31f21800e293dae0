"""The path through the app: under each lesson, the words it uses (defined on the same screen)
and a button to the next lesson, which switches the tab; it and every tab click scroll the
page back to the lesson's start, its title just under the sticky tab strip (`wire_scroll`).
The order, labels and words are `lessons.TABS`."""
from __future__ import annotations

import gradio as gr

from visualizations.glossary import lesson_words_md

from .. import BY_ID


def lesson_footer(tab_id: str, tabs: gr.Tabs) -> None:
    """The words of lesson `tab_id` and its "next lesson" button (which selects `tabs`' next
    tab). Call inside that lesson's tab."""
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


# Gradio's scroll_to_output aims at the sticky tab strip, which always counts as in view, so
# the new lesson opened wherever the page was (452-1,438 px below its title). One listener:
# after a tab or a "Next lesson" click, scroll up to the top of the tabs when below it.
SCROLL_JS = """() => {
  const toStart = () => { const t = document.querySelector('#lesson-tabs'); if (!t) return;
    const y = t.getBoundingClientRect().top + window.scrollY;
    if (window.scrollY > y + 1) window.scrollTo({top: y, behavior: 'instant'}); };
  document.addEventListener('click', e => {
    if (e.target.closest('#lesson-tabs > .tab-wrapper button[role=tab], button.lab-next'))
      requestAnimationFrame(() => requestAnimationFrame(toStart)); }, true);
}"""


def wire_scroll(demo: gr.Blocks) -> None:
    """Install the one listener that brings a newly opened lesson's start into view."""
    demo.load(None, None, None, js=SCROLL_JS, queue=False, api_visibility="private")
