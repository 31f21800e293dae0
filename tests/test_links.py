"""A teacher's link (`?lesson=…&prompt=…&present=1`): it opens its lesson and fills the
prompt boxes it names; anything it cannot honour is ignored with a notice, shown as plain text."""
from __future__ import annotations

import pytest

from lessons.common.progress import LESSONS, PROMPT_BOXES, read_link

LIMIT = 100


def test_link_opens_lesson_and_fills_its_prompts():
    state = read_link({"lesson": "kv", "prompt": "Why is the sky blue?"}, LIMIT)
    assert state.tab == "kv" and state.prompt == "Why is the sky blue?"
    assert state.boxes == PROMPT_BOXES["kv"] and not state.notices


@pytest.mark.parametrize("tab", LESSONS)
def test_every_tab_id_opens(tab):
    state = read_link({"lesson": tab.upper()}, LIMIT)
    assert state.tab == tab and not state.notices


def test_unknown_lesson_is_ignored_with_a_notice():
    state = read_link({"lesson": "<script>x</script>" * 10, "prompt": "hi"}, LIMIT)
    assert state.tab is None and state.prompt is None and state.boxes == ()
    assert "does not exist" in state.notice_md and "<script>" not in state.notice_md


def test_oversized_prompt_is_ignored_but_the_lesson_opens():
    state = read_link({"lesson": "prefill", "prompt": "x" * (LIMIT + 1)}, LIMIT)
    assert state.tab == "prefill" and state.prompt is None and state.boxes == ()
    assert "101 characters" in state.notice_md and "limit of 100" in state.notice_md
    assert read_link({"lesson": "prefill", "prompt": "x" * LIMIT}, LIMIT).prompt == "x" * LIMIT


def test_prompt_for_a_lesson_without_a_prompt_box():
    state = read_link({"lesson": "machine", "prompt": "hi"}, LIMIT)
    assert state.tab == "machine" and state.prompt is None and "no prompt box" in state.notice_md
    assert read_link({"prompt": "hi"}, LIMIT).notices  # a prompt and no lesson


def test_present_opens_the_presenter_and_no_params_change_nothing():
    assert read_link({"present": "1"}, LIMIT).tab == "present"
    assert read_link({"present": "0"}, LIMIT).tab is None
    assert read_link({}, LIMIT) == read_link({"lesson": ""}, LIMIT)
    assert read_link({}, LIMIT).notice_md == ""


def test_link_markdown_and_html_show_as_plain_text():
    """A link's own text never becomes markup inside the app's notice: a visitor's link
    must not inject markup."""
    from markdown_it import MarkdownIt

    render = MarkdownIt("commonmark", {"html": True}).render
    for lesson in ["[Log in](https://evil.example/login)", "![x](https://evil.example/i.png)",
                   "<img src=https://evil.example/i.png>", "https://evil.example",
                   "`[x](y)` **bold**", "<a href='https://e.example'>hi</a>"]:
        html = render(read_link({"lesson": lesson}, LIMIT).notice_md)
        assert "does not exist" in html
        assert "<a " not in html and "<img" not in html and "<strong" not in html, html
        assert "evil.example" in html or "e.example" in html or "bold" in html  # shown, as text
