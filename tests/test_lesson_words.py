"""Reading load: each lesson tab shows at most `WORDS_BEFORE_CONTROL` words before its first
control (the rest folded under "Read more"), counted from the built app's Blocks in page order;
and Start here's "what you will see" table names every tab of the app's `TABS` list."""
from __future__ import annotations

import re

import gradio as gr
import pytest

from lessons import TABS
from lessons.common.lesson_text import lesson_text

WORDS_BEFORE_CONTROL = 150
# What a learner acts on: the first of these ends the reading before the lesson's first control.
CONTROLS = (gr.Button, gr.Textbox, gr.Slider, gr.Number, gr.Dropdown, gr.Radio, gr.Checkbox,
            gr.CheckboxGroup, gr.DownloadButton, gr.UploadButton, gr.File)
TAG = re.compile(r"<[^>]+>")
PICTURE = re.compile(r"<(svg|style|script)\b.*?</\1>", re.DOTALL | re.IGNORECASE)  # not prose
LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def words(text: str) -> int:
    """Words a reader sees in markdown or HTML: tags and link targets dropped, a diagram's
    labels (an SVG) not prose, symbols alone (table rules, bullets, `|`) not counted."""
    text = LINK.sub(r"\1", TAG.sub(" ", PICTURE.sub(" ", text or "")))
    return sum(1 for w in text.split() if re.search(r"\w", w))


def reading_before_control(block) -> tuple[int, object | None]:
    """(words shown before the first control under `block`, that control), in page order;
    a closed accordion, a hidden block and every inner tab but the first are not read."""
    count = 0
    for child in getattr(block, "children", []):
        if getattr(child, "visible", True) is False:
            continue
        if isinstance(child, gr.Accordion) and not child.open:
            continue
        if isinstance(child, CONTROLS) and getattr(child, "interactive", None) is not False:
            return count, child
        if isinstance(child, (gr.Markdown, gr.HTML)):
            count += words(child.value if isinstance(child.value, str) else "")
            continue
        if isinstance(child, gr.Tabs):  # inner tabs: only the one shown first is read
            shown = next((t for t in child.children if getattr(t, "visible", True)), None)
            if shown is None:
                continue
            more, control = reading_before_control(shown)
        else:
            more, control = reading_before_control(child)
        count += more
        if control is not None:
            return count, control
    return count, None


def lesson_tabs(demo) -> dict[str, object]:
    """The app's top-level tabs by id (`lessons.TABS`), as built."""
    ids = {t.id for t in TABS}
    return {b.id: b for b in demo.blocks.values()
            if isinstance(b, gr.Tab) and getattr(b, "id", None) in ids}


def test_the_word_counter_counts_what_a_reader_sees():
    with gr.Blocks() as demo:
        with gr.Tab("x", id="x") as tab:
            gr.Markdown("One [two](https://example.com) **three**\n\n| a | b |\n|---|---|")
            with gr.Accordion("Read more", open=False):
                gr.Markdown("hidden " * 500)
            gr.HTML("<p>four <b>five</b></p><svg><text>layer 1</text></svg>")
            gr.Button("Go")
            gr.Markdown("after " * 500)
    assert reading_before_control(tab)[0] == 7  # one two three a b four five
    assert isinstance(reading_before_control(tab)[1], gr.Button)
    del demo


@pytest.mark.parametrize("tab_id", [t.id for t in TABS if t.id not in ("present", "glossary")])
def test_each_lesson_has_at_most_150_words_before_its_first_control(app_module, tab_id):
    tab = lesson_tabs(app_module.demo)[tab_id]
    count, control = reading_before_control(tab)
    assert control is not None, f"{tab_id}: no control at all"
    assert count <= WORDS_BEFORE_CONTROL, (
        f"{tab_id}: {count} words before its first control "
        f"({type(control).__name__} {getattr(control, 'label', '')!r}); fold the rest under "
        "'Read more'")


def test_start_heres_table_names_every_tab():
    overview = lesson_text("overview.md")
    table = overview.split("### What you will see, in order", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("|")[1].strip() for line in table.splitlines()
            if line.startswith("| ") and not line.startswith("| Tab ")]
    assert rows == [t.label for t in TABS if t.id != "start"], rows
