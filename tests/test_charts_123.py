"""Figure, HTML and markdown builders for 'Try it' and lessons 1-3, on hand-made data."""
import re
from dataclasses import dataclass

from fake_events import Ev
from inference.events import Candidate
from inference.experiments.noise import judge
from inference.experiments.prefill_sweep import PrefillPoint
from inference.experiments.serving_cost import token_cost
from inference.tokens import Token
from visualizations.timing_charts import (
    candidates_figure,
    decode_latency_figure,
    prefill_sweep_figure,
)
from visualizations.timing_text import (
    live_stats_md,
    prefill_report_md,
    sweep_progress_md,
    sweep_verdict_md,
)
from visualizations.token_view import (
    decode_stats_md,
    output_html,
    template_note_md,
    token_cost_md,
    token_counts_md,
    token_html,
)


def test_token_html_marks_whitespace_and_specials():
    toks = [Token(1, "", "<|im_start|>", 0, 12, True),
            Token(905, " world", "Ġworld", 12, 18, False)]
    html = token_html(toks)
    assert "·world" in html and "<sub>905</sub>" in html
    assert html.count("lab-tok special") == 1
    assert "Type some text" in token_html([])


def test_token_counts():
    md = token_counts_md("one two three", 6)
    assert "**13** characters" in md and "**3** words" in md and "**2.00** tokens per word" in md


def test_prefill_sweep_figure_traces():
    pts = [PrefillPoint(8, 0.01, 0.08, True), PrefillPoint(64, 0.03, 0.64, True),
           PrefillPoint(512, 0.2, 5.12, False)]
    fig = prefill_sweep_figure(pts, "cap")
    assert [list(t.x) for t in fig.data] == [[8, 64, 512], [8, 64], [64, 512]]
    assert list(fig.data[0].y) == [10.0, 30.0, 200.0]
    assert "extrapolated" in fig.data[2].name and "measured" in fig.data[1].name
    assert fig.layout.xaxis.type == "log"
    assert fig.layout.yaxis.title.text == "time (ms, log scale)"


def test_decode_latency_figure_marks_first_token():
    fig = decode_latency_figure([0.5, 0.1, 0.1, 0.2], "cap")
    first, steps, rate = fig.data  # one trace per colour, so the legend shows each
    assert list(first.x) == [0] and list(first.y) == [500.0]
    assert list(steps.x) == [1, 2, 3] and list(steps.y) == [100.0, 100.0, 200.0]
    assert first.marker.color != steps.marker.color
    assert rate.y[0] is None and abs(rate.y[2] - 10.0) < 1e-9 and abs(rate.y[3] - 7.5) < 1e-9


def test_candidates_figure_shows_shaped_bars():
    cands = [Candidate(5, " a", 0.7, 0.6), Candidate(6, " b", 0.3, 0.4)]
    fig = candidates_figure(cands, 6, [0.75, 0.25])
    assert len(fig.data) == 2
    assert list(fig.data[0].x) == [40.0, 60.0]  # reversed: most likely on top
    assert list(fig.data[1].x) == [25.0, 75.0]
    assert candidates_figure(cands, 6, None).data.__len__() == 1




def test_output_html_and_stats():
    evs = [Ev(0, "Hi", False, 1, "greedy", 0.5, 30, 30, 1000),
           Ev(1, " there", False, 2, "your pick", 0.1, 1, 31, 2000),
           Ev(2, "", True, 3, "greedy", 0.1, 1, 32, 3000)]
    html = output_html(evs)
    assert "·there" in html and "end of turn" in html and "<sub>2</sub>" in html
    md = decode_stats_md(evs, "end of turn")
    assert "500 ms" in md and "100 ms" in md and "10.0 tokens/s" in md and "end of turn" in md


def test_template_note_and_cost_lines():
    note = template_note_md(2, 30, 6)
    assert "your 2 tokens become **30**" in note and "**28** tokens" in note
    cost = token_cost(1000, 300, 0.5, 1.5)
    md = token_cost_md(cost, 0.5, 1.5)
    assert "**1,000 input tokens** × $0.5/M = $0.000500" in md
    assert "**300 output tokens** × $1.5/M = $0.000450" in md
    assert "per request $0.000950" in md and "**$950**" in md  # per million requests


def test_live_stats_line():
    assert "Generate" in live_stats_md(None, 0, 0, 0)
    md = live_stats_md(0.25, 0.5, 5, 30)
    assert "**250 ms** (30 prompt tokens)" in md  # no event: nothing claimed of its passes
    assert "**100 ms**" in md and "**10.0 tokens/s**" in md and "6 tokens generated" in md
    assert "**—**" in live_stats_md(0.25, 0, 0, 30)  # one token: no decode step yet


QUIET = judge(others_cpu=0.02)  # a run the noise rule judged quiet: its verdict is drawn


@dataclass
class Measured:
    prompt_tokens: int
    prefill_seconds: float
    ttft_seconds: float
    decode_step_seconds: float | None
    decode_steps: int
    noise: object = QUIET


def test_prefill_report_quotes_the_measured_ratio():
    md = prefill_report_md(Measured(100, 0.2, 0.25, 0.05, 4))
    assert "**100 tokens**" in md and "**200 ms** (500 tokens/s)" in md
    assert "**2.0 ms per prompt token**, **25×** less" in md  # 50 ms / (200 ms / 100)
    assert "≈ 5.0 decode steps" in md
    short = prefill_report_md(Measured(10, 0.02, 0.03, None, 0))
    assert "decode step" not in short and "**10 tokens**" in short


def test_sweep_lines_quote_measured_not_extrapolated():
    pts = [PrefillPoint(8, 0.01, 0.08, True), PrefillPoint(64, 0.02, 0.64, True),
           PrefillPoint(512, 0.1, 5.12, False)]
    assert sweep_progress_md(3, 3, pts[2]).endswith("(extrapolated)")
    assert "64 tokens → prefill 20 ms vs one-at-a-time 640 ms" in sweep_progress_md(2, 3, pts[1])
    verdict = sweep_verdict_md(pts, QUIET)
    assert "At 64 tokens (measured both ways)" in verdict and "**32×**" in verdict
    only_extrapolated = sweep_verdict_md([PrefillPoint(512, 0.1, 5.0, False)], QUIET)
    assert "extrapolated" in only_extrapolated and "**50×**" in only_extrapolated
    assert sweep_verdict_md([]) == "No prompt lengths were measured."


def card_values(md: str) -> list[str]:
    return re.findall(r"<span class='lab-big-value'>([^<]*)</span>", md)


def test_decode_and_prefill_headline_numbers_are_cards():
    """Decode's TTFT/TPOT and Prefill's speed-up are cards a back row can read, not 14-px prose
    (visualizations/cards.py, the first screen's), each saying how it was measured."""
    evs = [Ev(0, "Hi", False, 1, "greedy", 0.5, 30, 30, 1000),
           Ev(1, " there", False, 2, "greedy", 0.1, 1, 31, 2000),
           Ev(2, "!", False, 3, "greedy", 0.1, 1, 32, 1_500_000)]
    md = decode_stats_md(evs, None)
    assert card_values(md) == ["500 ms", "100 ms", "10.0 tokens/s", "1.50 MB"]
    assert "prefill of 30 tokens" in md and "32 positions" in md and "**Tokens:** 3" in md
    assert card_values(decode_stats_md(evs[:1], None)) == ["500 ms", "—", "—", "0.00 MB"]
    assert "lab-big" not in decode_stats_md([], None)
    assert card_values(prefill_report_md(Measured(100, 0.2, 0.25, 0.05, 4))) == [
        "200 ms", "250 ms", "25×"]
    assert "cheaper by" in prefill_report_md(Measured(100, 0.2, 0.25, 0.05, 4))
    slow = prefill_report_md(Measured(10, 0.2, 0.25, 0.01, 4))  # 20 ms a token vs 10 ms a step
    assert card_values(slow)[-1] == "2.0×" and "costs more by" in slow
    assert card_values(prefill_report_md(Measured(10, 0.02, 0.03, None, 0))) == ["20 ms", "30 ms"]
    assert card_values(live_stats_md(0.25, 0.5, 5, 30)) == ["250 ms", "100 ms", "10.0 tokens/s"]


def test_empty_decode_charts_name_their_buttons():
    for fig in (candidates_figure([], None, None), decode_latency_figure([], "")):
        (note,) = fig.layout.annotations
        assert "Step" in note.text and "appear" in note.text


def test_issue_23_words_are_defined_and_listed_where_used():
    """GFLOP/s, FLOPs per byte, AVX-512/AMX, matmul, activations, sliding window and "synced"
    have glossary entries, and each is in the word list of a lesson whose text uses it."""
    import lessons
    from visualizations.glossary import TERMS

    where = {"flops": "machine", "intensity": "machine", "simd": "quantization",
             "matmul": "machine", "activations": "quantization", "window": "context",
             "synced": "decode"}
    for key, tab in where.items():
        name, meaning = TERMS[key]
        assert len(meaning) > 40, (key, meaning)
        assert key in lessons.BY_ID[tab].words, (key, tab)
