"""Figure and HTML builders for lessons 1-3, on hand-made data."""
from dataclasses import dataclass

from inference.events import Candidate
from inference.experiments.prefill_sweep import PrefillPoint
from inference.tokens import Token
from visualizations.decode_view import decode_stats_md, output_html
from visualizations.timing_charts import (candidates_figure, decode_latency_figure,
                                          prefill_sweep_figure)
from visualizations.token_view import token_counts_md, token_html


def test_token_html_marks_whitespace_and_specials():
    toks = [Token(1, "", "<|im_start|>", 0, 12, True), Token(905, " world", "Ġworld", 12, 18, False)]
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
    bars, rate = fig.data
    assert list(bars.y) == [500.0, 100.0, 100.0, 200.0]
    assert bars.marker.color[0] != bars.marker.color[1]
    assert rate.y[0] is None and abs(rate.y[2] - 10.0) < 1e-9 and abs(rate.y[3] - 7.5) < 1e-9


def test_candidates_figure_shows_shaped_bars():
    cands = [Candidate(5, " a", 0.7, 0.6), Candidate(6, " b", 0.3, 0.4)]
    fig = candidates_figure(cands, 6, [0.75, 0.25])
    assert len(fig.data) == 2
    assert list(fig.data[0].x) == [40.0, 60.0]  # reversed: most likely on top
    assert list(fig.data[1].x) == [25.0, 75.0]
    assert candidates_figure(cands, 6, None).data.__len__() == 1


@dataclass
class Ev:
    index: int
    piece: str
    special: bool
    token_id: int
    chosen_by: str
    seconds: float
    forward_tokens: int
    cache_tokens: int
    cache_bytes: int


def test_output_html_and_stats():
    evs = [Ev(0, "Hi", False, 1, "greedy", 0.5, 30, 30, 1000), Ev(1, " there", False, 2, "your pick", 0.1, 1, 31, 2000),
           Ev(2, "", True, 3, "greedy", 0.1, 1, 32, 3000)]
    html = output_html(evs)
    assert "·there" in html and "end of turn" in html and "<sub>2</sub>" in html
    md = decode_stats_md(evs, "end of turn")
    assert "500 ms" in md and "100 ms" in md and "10.0 tokens/s" in md and "end of turn" in md
