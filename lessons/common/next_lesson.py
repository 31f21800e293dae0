"""The path through the app (`lessons.TABS`): under each lesson, the words it uses and a button
to the next lesson; that and every tab click scroll back to the lesson's start, and a glossary
term linked in a lesson's text opens the Glossary tab at its entry, in the same page."""
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


# Gradio's scroll_to_output aims at the sticky tab strip, which always counts as in view, so a
# new lesson opened wherever the page was. After a tab or "Next lesson" click, scroll up to the
# top of the tabs; a term's link (`?lesson=glossary#gl-<key>`, followed or loaded) opens the
# Glossary tab and scrolls its entry into view; on a phone, the open tab is kept in the strip.
SCROLL_JS = """() => {
  const toStart = () => { const t = document.querySelector('#lesson-tabs'); if (!t) return;
    const y = t.getBoundingClientRect().top + window.scrollY;
    if (window.scrollY > y + 1) window.scrollTo({top: y, behavior: 'instant'}); };
  document.addEventListener('click', e => {
    if (e.target.closest('#lesson-tabs > .tab-wrapper button[role=tab], button.lab-next'))
      requestAnimationFrame(() => requestAnimationFrame(toStart)); }, true);
  const showTerm = (id, tries) => { const t = document.getElementById(id);
    if (t && t.offsetParent !== null) { t.scrollIntoView({block: 'center', behavior: 'instant'});
      return; }
    if (tries > 0) setTimeout(() => showTerm(id, tries - 1), 100); };
  document.addEventListener('click', e => {
    const a = e.target.closest && e.target.closest('a[href^="?lesson=glossary#gl-"]');
    if (!a || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey) return;
    e.preventDefault();
    const tab = document.querySelector(
      '#lesson-tabs > .tab-wrapper [role=tab][data-tab-id="glossary"]');
    if (tab) tab.click();
    showTerm(a.getAttribute('href').split('#')[1], 30); }, true);
  if (location.hash.startsWith('#gl-')) showTerm(location.hash.slice(1), 100);
  const showTab = () => {  // a phone's tab strip scrolls sideways: keep the open tab in it
    const s = document.querySelector('#lesson-tabs > .tab-wrapper .tab-container');
    const t = s && s.querySelector('[role=tab][aria-selected=true]');
    if (!t || s.scrollWidth <= s.clientWidth) return;
    const a = s.getBoundingClientRect(), b = t.getBoundingClientRect();
    if (b.left < a.left || b.right > a.right)
      s.scrollLeft += b.left - a.left - (a.width - b.width) / 2; };
  new MutationObserver(showTab).observe(document.body,
    {subtree: true, attributes: true, attributeFilter: ['aria-selected']});
  showTab();
}"""


def wire_scroll(demo: gr.Blocks) -> None:
    """Install the one listener that brings a newly opened lesson's start into view."""
    demo.load(None, None, None, js=SCROLL_JS, queue=False, api_visibility="private")
