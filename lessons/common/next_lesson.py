"""The path through the app: under each lesson, the words it uses (defined on the same screen)
and a button to the next lesson, which switches the tab and scrolls back up to the tab strip.
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
