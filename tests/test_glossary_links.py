"""Glossary terms linked from their first use in each lesson's text (pure, no model).

`link_terms` is checked on hand-written markdown (first use only, the definition as the title,
code, links, HTML and headings left alone), then on every lesson's own text: its words read
the same once the links are taken out, and every link goes to an entry the Glossary has.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from lessons.common.lesson_text import lesson_page, lesson_text
from visualizations.glossary import TERMS, glossary_md, link_terms, term_forms, term_href

LINK = re.compile(r'\[([^\]]+)\]\(\?lesson=glossary#gl-(\w+) "([^"]*)"\)')
ROOT = Path(__file__).resolve().parent.parent


def links(md: str) -> list[tuple[str, str]]:
    return [(text, key) for text, key, _ in LINK.findall(md)]


def unlinked(md: str) -> str:
    return LINK.sub(lambda m: m.group(1), md)


def test_first_use_of_each_term_is_linked_with_its_definition():
    md = "Prefill fills the KV cache. Then the KV cache is read; each KV cache grows."
    out = link_terms(md)
    assert links(out) == [("Prefill", "prefill"), ("KV cache", "kv")]
    title = LINK.findall(out)[1][2]
    assert title == f"{TERMS['kv'][0]}: {TERMS['kv'][1]}"
    assert unlinked(out) == md
    assert term_href("kv") == "?lesson=glossary#gl-kv" and "<a id='gl-kv'></a>" in glossary_md()


def test_plurals_case_and_the_longest_form_win():
    out = link_terms("Greedy decoding picks; greedy again. Continuous batching, then batching. "
                     "Two forward passes. TTFT, and ttft in lower case.")
    assert links(out) == [("Greedy decoding", "greedy"), ("Continuous batching", "continuous"),
                          ("batching", "batch"), ("forward passes", "forward"), ("TTFT", "ttft")]
    # acronyms match their own case only; a unit's "/s" is not a word of its own
    assert links(link_terms("tokens/s and 40 GFLOP/s")) == [("GFLOP/s", "flops")]
    assert links(link_terms("a kludge, an ampx, O(n) work")) == [("O(n)", "o1")]


def test_code_links_html_and_headings_stay_as_written():
    md = ("## The KV cache\n`KV cache` in code, [the KV cache](https://x.example) linked, "
          "<span title='KV cache'>KV cache</span>, <a href='#'>KV cache</a>.\n"
          "```\nKV cache\n```\nAt last the **KV cache** in bold.")
    out = link_terms(md)
    assert links(out) == [("KV cache", "kv")]
    assert out.endswith('**[KV cache](?lesson=glossary#gl-kv "' + TERMS["kv"][0] + ": "
                        + TERMS["kv"][1] + '")** in bold.')
    assert unlinked(out) == md


def test_only_the_keys_asked_for():
    assert links(link_terms("prefill and decode", ["decode"])) == [("decode", "decode")]


def test_every_term_has_a_form_and_quotes_cannot_end_a_title():
    assert all(term_forms(k) for k in TERMS)
    assert all('"' not in t for _, _, t in LINK.findall(link_terms(" ".join(
        f for k in TERMS for f in term_forms(k)))))


LESSONS = sorted(p.name for p in (ROOT / "assets").glob("lesson*.md"))


@pytest.mark.parametrize("name", LESSONS)
def test_each_lessons_text_links_its_terms_and_reads_the_same(name):
    extra = {"weights_origin": ""}
    page = lesson_page(name, None, extra)
    found = links(page)
    assert found, f"{name}: no glossary term linked"
    keys = [k for _, k in found]
    assert len(keys) == len(set(keys)) and set(keys) <= set(TERMS)  # first use only
    assert unlinked(page) == lesson_text(name, None, extra)


def test_every_lesson_tab_shows_its_text_linked():
    """Each lesson's assets/ text is rendered through `lesson_page`, not the bare text: by
    app.py for a tab's `text`, or by its panel (a text with extra blocks)."""
    from lessons import TABS
    for panel in sorted((ROOT / "lessons").glob("*_panel.py")):
        source = panel.read_text(encoding="utf-8")
        assert "gr.Markdown(lesson_text(" not in source, panel.name
    assert "lesson_page(tab.text" in (ROOT / "app.py").read_text(encoding="utf-8")
    panels = " ".join(p.read_text(encoding="utf-8") for p in (ROOT / "lessons").glob("*_panel.py"))
    by_app = {t.text for t in TABS if t.text}
    assert all(name in by_app or f'lesson_page("{name}"' in panels for name in LESSONS)
    overview = lesson_page("overview.md")  # the first screen's overview too
    assert links(overview) and unlinked(overview) == lesson_text("overview.md")
