"""bench/visitor_memory.py's helpers from hand-made samples, texts and configs (no app)."""
from __future__ import annotations

from bench import clients, targets, visitor_memory
from bench.visitor_memory import fitting_prompt, lesson_prose, settled
from inference.config import LIMITS


def test_pileup_rss_settled_once_it_stops_falling_over_the_window():
    falling = [(t, 1000.0 - 10 * t) for t in range(0, 21, 2)]  # 10 MB a second, for 20 s
    assert not settled(falling, window_s=10, tolerance_mb=2)
    flat = falling + [(t, 800.0 + (t % 2) * 0.5) for t in range(21, 33)]  # then ±0.5 MB
    assert settled(flat, window_s=10, tolerance_mb=2)
    rising = [(t, 800.0 + t) for t in range(12)]  # a rise is not a fall: settled
    assert settled(rising, window_s=10, tolerance_mb=2)
    assert not settled([(0, 800.0), (5, 800.0)], window_s=10)  # too short to say
    assert not settled([])


def test_pileup_fitting_prompt_is_the_longest_start_within_both_limits():
    text = " ".join(f"w{i}" for i in range(1_000))
    counted = []

    def words(t: str) -> int:
        counted.append(t)
        return len(t.split())

    cut = fitting_prompt(text, words, 300, 10_000)
    assert cut.split() == [f"w{i}" for i in range(300)]
    assert len(counted) <= 12  # bisection, not a walk
    by_chars = fitting_prompt(text, words, 10_000, 50)
    assert len(by_chars) <= 50 and text.startswith(by_chars) and not by_chars.endswith(" ")
    assert text[len(by_chars)] == " "  # cut where a word ends


def test_pileup_the_long_prompt_is_real_text_longer_than_the_app_accepts():
    prose = lesson_prose()
    assert len(prose) > LIMITS.max_prompt_chars  # so the app's own limit decides the cut
    assert "{" not in prose and "\n#" not in prose  # no placeholders, no headings


def test_pileup_endpoint_data():
    config = {"components": [{"id": 3, "props": {"elem_id": "p", "value": ""}},
                             {"id": 4, "props": {"elem_classes": ["limit-x"], "value": 8}},
                             {"id": 9, "props": {"elem_id": "q", "value": False}}],
              "dependencies": [{"id": 0, "api_name": "other", "inputs": []},
                               {"id": 5, "api_name": "run", "inputs": [9, 3, 4]}]}
    assert clients.endpoint_data(config, "run", {"p": "long text", "q": True}) \
        == (5, [True, "long text", 8])


def test_pileup_targets_bound_the_rss_growth():
    assert visitor_memory.TARGETS == {"serving.fresh_sessions.rss_growth_mb": ("<=", 200),
                                      "serving.attention_sessions.rss_growth_mb": ("<=", 300)}
    got = targets.check({"serving": {"fresh_sessions": {"rss_growth_mb": 250.0}}},
                        visitor_memory.TARGETS)
    assert not got["serving.fresh_sessions.rss_growth_mb"]["met"]
    assert got["serving.attention_sessions.rss_growth_mb"]["value"] is None
