"""Sentences a screen shows, read for hand-made records where they used to say something
untrue: a prompt partly read from the prefix cache, a prompt chunked over several passes, a
wait for a row, a slower draft that kept every guess, a launch-bound GPU-like step, a ratio
just above 1. Pure functions only: no model is loaded."""
from __future__ import annotations

import html
import re

from inference.events import StepEvent
from visualizations.first_screen import live_cards_html
from visualizations.mechanism import decode_diagram
from visualizations.timing_text import live_stats_md, prompt_work

PROMPT = [f"t{i}" for i in range(35)]


def first_event(computed: int, cached: int = 0, passes: int = 1) -> StepEvent:
    return StepEvent(index=0, token_id=1, piece=" a", text=" a", special=False, candidates=(),
                     chosen_by="greedy", forward_tokens=computed, forward_seconds=0.04,
                     seconds=0.05, cache_tokens=computed + cached, cache_bytes=0,
                     prefix_cached_tokens=cached, prefill_passes=passes)


def text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_a_prefix_hit_says_what_was_computed_and_what_came_from_the_cache():
    ev = first_event(3, cached=32)
    said = text(live_cards_html(0.05, None, 35, 0, 1, ev))
    assert "3 of 35 prompt tokens computed in one pass" in said
    assert "32 read from the prefix cache" in said and "lesson 4b" in said
    assert "35 prompt tokens in one pass" not in said
    stats = live_stats_md(0.05, 0.0, 0, 35, ev)
    assert "3 of 35 prompt tokens computed" in stats and "prefill of 35" not in stats
    head = text(decode_diagram(PROMPT, [ev], 30))
    assert not re.search(r"\brefill", head)  # lesson 3's word for a freed cache
    assert "32 tokens from the prefix cache" in head and "3 tokens computed in one pass" in head


def test_a_chunked_prompt_says_how_many_passes():
    ev = first_event(600, passes=3)
    said = text(live_cards_html(0.9, None, 600, 0, 1, ev))
    assert "600 prompt tokens computed in 3 passes" in said and "one pass" not in said
    assert "3 passes (chunked prefill)" in text(decode_diagram([f"t{i}" for i in range(600)],
                                                               [ev], 30))


def test_a_wait_for_a_row_is_named_in_the_first_token_time():
    said = live_stats_md(0.45, 0.0, 0, 35, first_event(35), queued_s=0.3)
    assert "35 prompt tokens computed in one pass, after 300 ms waiting for a row" in said
    assert "waiting" not in prompt_work(first_event(35), queued_s=0.0)


def test_another_engine_claims_nothing_about_its_cache():
    ev = first_event(35, passes=0)  # a remote engine's event: passes unknown
    assert prompt_work(ev) == "35 prompt tokens"
