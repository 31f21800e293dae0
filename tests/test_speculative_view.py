"""The speculative-decoding drawings on hand-made records: the numbers drawn are the records'."""
import re
from dataclasses import replace

from chart_reading import caption_text
from inference.experiments.noise import judge
from inference.experiments.spec_expectation import VerifyCost
from inference.experiments.speculative_race import SpecRaceSummary
from inference.speculative import SpecPass
from visualizations.speculative_charts import (
    EMPTY_BATCH,
    EMPTY_PASSES,
    EMPTY_RACE,
    EMPTY_SWEEP,
    KEPT,
    MODEL,
    REJECTED,
    UNUSED,
    batch_figure,
    batch_md,
    k_sweep_figure,
    passes_html,
    race_md,
)

QUIET = judge(others_cpu=0.02)  # a run the noise rule judged quiet: its verdict is drawn


def _pass(index=1, pieces=(" the", " cat", " sat"), accepted=1, model=" dog", seconds=0.125):
    return SpecPass(index=index, proposed=tuple(range(len(pieces))), proposed_pieces=pieces,
                    accepted=accepted, model_token=None if model is None else 99,
                    model_piece=model or "", new_ids=tuple(range(accepted + (model is not None))),
                    forward_tokens=len(pieces) + 1, draft_seconds=0.002, verify_seconds=0.12,
                    seconds=seconds, cache_tokens=40, tokens_so_far=5, text="x", finished=None)


def _summary(**kw):
    base = dict(draft="prompt_lookup", k=4, prompt_tokens=60, new_tokens=33, identical=True,
                passes=10, proposed=40, accepted=22, spec_seconds=1.0, draft_seconds=0.01,
                plain_seconds=2.0, plain_step_seconds=(0.0625,) * 32, bandwidth_gbs=20.0,
                bytes_per_token=500_000_000, noise=0.05)
    return SpecRaceSummary(**(base | kw))


def test_speculative_pass_chips_colour_each_guess():
    html = passes_html([_pass()])
    assert html.count(KEPT) == 1 and html.count(REJECTED) == 1 and html.count(UNUSED) == 1
    assert html.count(MODEL) == 1
    assert "✓·the" in html and "✗·cat" in html and "★·dog" in html
    assert "+2 tokens · 125 ms" in html and "model pass 120 ms" in html
    assert "3 guesses, 1 kept" in html


def test_speculative_pass_rows_empty_draft_and_end_of_turn():
    plain = _pass(pieces=(), accepted=0)
    assert "a plain decode step" in passes_html([plain]) and "+1 token ·" in passes_html([plain])
    ended = _pass(pieces=(" yes", "<|im_end|>", " more"), accepted=2, model=None)
    html = passes_html([ended])
    assert MODEL not in html and html.count(KEPT) == 2 and html.count(REJECTED) == 1
    assert passes_html([]) == EMPTY_PASSES
    many = passes_html([_pass(index=i) for i in range(15)], last=12)
    assert "3 earlier passes not shown" in many and many.count("<b>Pass") == 12


def test_speculative_race_cards_show_the_measured_figures():
    s = _summary()
    md = race_md(s, QUIET)
    # 32 decoded tokens over 10 passes; 32 / 1.0 s against 32 / 2.0 s
    assert "3.20" in md and "32.0 tok/s" in md and "16.0 tok/s" in md and "2.0×" in md
    assert "55%" in md and "22 of 40" in md and "**faster**" in md
    assert "below the one-token ceiling of 40.0 tokens/s" in md and "80%" in md
    assert "with the draft's own weight reads, it would be 128.0" in md  # a lookup reads none
    assert race_md(None) == EMPTY_RACE


def test_speculative_verdict_sentences_follow_the_figures():
    assert "**slower**" in race_md(_summary(spec_seconds=3.0), QUIET)
    assert "No difference beyond this run's noise" in race_md(_summary(spec_seconds=1.98),
                                                              QUIET)
    above = race_md(_summary(spec_seconds=0.5), QUIET)  # 64 tok/s over a 40 tok/s ceiling
    assert "**above** the one-token ceiling of 40.0" in above
    assert "tokens differ" in race_md(_summary(identical=False), QUIET)


def test_speculative_k_sweep_plots_both_drafts():
    pts = [_summary(k=k, passes=32 // (1 + k // 2), spec_seconds=1.0 + k / 10) for k in (1, 2, 3)]
    pts += [replace(p, draft="int4", spec_seconds=2.5) for p in pts]
    fig = k_sweep_figure(pts, "cap", QUIET)
    lines = {(t.name, t.xaxis): t for t in fig.data}
    tpp = lines[("prompt_lookup", "x")]
    assert list(tpp.x) == [1, 2, 3] and list(tpp.y) == [p.tokens_per_pass for p in pts[:3]]
    speed = lines[("int4", "x2")]
    assert [round(y, 2) for y in speed.y] == [0.8, 0.8, 0.8]
    assert "prompt_lookup at k = 1" in caption_text(fig)
    slow = k_sweep_figure(pts[3:], noise=QUIET)
    assert "No draft beat plain decoding" in caption_text(slow)
    assert k_sweep_figure([]).layout.annotations[0].text == EMPTY_SWEEP


def test_speculative_batch_cost_chart_and_table():
    costs = [VerifyCost(1, 4, 0.05, 0.06, "memory", "memory"),
             VerifyCost(16, 4, 0.10, 0.40, "memory", "compute")]
    fig = batch_figure(costs)
    plain, verify = fig.data
    assert list(plain.y) == [50.0, 100.0] and [round(y) for y in verify.y] == [60, 400]
    assert verify.text[1] == "400 ms (4.0 steps)"
    assert "costs 4.0 plain steps (batch 1: 1.2)" in caption_text(fig)
    md = batch_md(costs, tokens_per_pass=3.0, noise=QUIET)
    assert "| 16 | 100.0 | 400.0 | 4.00 | memory, compute | 0.75× |" in md
    assert "| 1 | 50.0 | 60.0 | 1.20 | memory, memory | 2.5× |" in md
    assert re.search(r"Batch 16: a pass of 80 tokens .*arithmetic", md)
    assert re.search(r"Batch 1: a pass of 5 tokens .*ride along", md)
    assert batch_figure([]).layout.annotations[0].text == EMPTY_BATCH
    # Neither roof reached (a busy or launch-bound run): no claim about the weights' read.
    neither = batch_md([VerifyCost(4, 4, 0.05, 0.07, "neither", "neither")], 3.0,
                       QUIET)
    assert re.search(r"Batch 4: .*under half of both measured roofs", neither)
    assert "ride along" not in neither and "arithmetic, not" not in neither
