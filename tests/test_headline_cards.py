"""Lessons 5 and 6 show their headline numbers as big cards under their button.
The pure builders on hand-made records: the numbers shown, a verdict word only from a quiet
finished run whose numbers support it, none from a busy one, and an empty state that names
the button that fills it."""
import re
from dataclasses import replace
from types import SimpleNamespace

import pytest

from inference.experiments.batch_sweep import BatchPoint
from inference.experiments.noise import judge
from inference.experiments.quality import ModeReport
from visualizations import batching_text, quant_charts, roofline_charts

W = 500_000_000  # weight bytes
QUIET, BUSY_RUN = judge(spread=0.03, others_cpu=0.02), judge(others_cpu=0.6)


def values(html: str) -> list[str]:
    return re.findall(r"<span class='lab-big-value'>([^<]*)</span>", html)


def notes(html: str) -> list[str]:
    return re.findall(r"<span class='lab-big-note'>([^<]*)</span>", html)


def sweep(*step_seconds: float, finished: bool = True):
    """Batches 1, 2, 4, ... with these median step times (tokens/s = batch ÷ step)."""
    points = tuple(BatchPoint(2 ** i, 10, 0.1, s, (s,), 0, W) for i, s in enumerate(step_seconds))
    return SimpleNamespace(points=points, finished=finished)


# --- lesson 5: the sweep ---------------------------------------------------------------------

def test_sweep_cards_before_a_run_name_the_button():
    for empty in (None, sweep()):
        md = batching_text.sweep_cards(empty)
        assert md == batching_text.NO_SWEEP_CARDS and "Run sweep" in md
        assert "lab-big" not in md


def test_sweep_cards_quote_batch_one_the_largest_and_their_ratio():
    md = batching_text.sweep_cards(sweep(0.1, 0.125, 0.2), QUIET)  # 10, 16, 20 tokens/s
    assert values(md) == ["10.0", "20.0", "2.0×"]
    assert "batch 1 tok/s<" in md and "batch 4 tok/s<" in md and "batch 4 ÷ 1<" in md
    assert all("measured" in n for n in notes(md))
    assert notes(md)[-1] == "grows, measured"
    assert "busy" not in md


def test_sweep_ratio_card_words_only_what_the_numbers_show():
    fell = batching_text.sweep_cards(sweep(0.1, 0.25, 0.5), QUIET)  # 10, 8, 8 tokens/s
    assert values(fell)[-1] == "0.80×" and notes(fell)[-1] == "fell here, measured"
    levelled = batching_text.sweep_cards(sweep(0.1, 0.1, 0.3), QUIET)  # 10, 20, 13.3
    assert notes(levelled)[-1] == "levelled off, measured"
    assert "grows" not in fell + levelled


def test_a_busy_sweep_keeps_its_numbers_and_draws_no_word():
    for numbers in [(0.1, 0.125, 0.2), (0.1, 0.25, 0.5)]:  # rising, falling
        md = batching_text.sweep_cards(sweep(*numbers), BUSY_RUN)
        assert values(md)[0] == "10.0" and len(values(md)) == 3  # measured: they stand
        assert notes(md)[-1] == "busy machine: noisy"
        assert "grows" not in md and "fell" not in md and "levelled" not in md


def test_a_running_sweep_shows_what_is_measured_so_far():
    one = batching_text.sweep_cards(sweep(0.1, finished=False))
    assert values(one) == ["10.0", "—"] and "next batch size" in one
    two = batching_text.sweep_cards(sweep(0.1, 0.125, finished=False), QUIET)
    assert values(two) == ["10.0", "16.0", "1.6×"]
    assert notes(two)[-1] == "so far, measured" and "grows" not in two


# --- lesson 6: the precision modes -----------------------------------------------------------

def report(key: str, wbytes: float, tps: float) -> ModeReport:
    return ModeReport(key=key, label=f"{key} label", kernel="dense matmul", head_treatment="tied",
                      weight_bytes=wbytes, bytes_per_token=wbytes, ratio_to_fp32=wbytes / 500e6,
                      prompt_tokens=20, prefill_seconds=0.1, decode_tokens_per_s=tps,
                      text_tokens=400, text_prefill_seconds=0.5, token_ids=(1, 2),
                      pieces=("a", "b"), top1_agreement=1.0, top1_decided=1.0,
                      decided_positions=50, kl_mean=0.01, perplexity=12.5)


@pytest.fixture
def modes():
    return [report("fp32", 500e6, 10.0), report("bf16", 250e6, 12.0),
            report("int8", 135e6, 18.0)]


def test_mode_cards_before_a_run_name_the_button():
    for empty in ([], None, [report("int8", 135e6, 18.0)]):  # no float32: nothing to compare
        md = quant_charts.mode_cards_html(empty)
        assert md == quant_charts.NO_MODES_CARDS and "Compare modes" in md


def test_mode_cards_set_the_smallest_mode_against_float32(modes):
    md = quant_charts.mode_cards_html(modes, QUIET)
    # picked by bytes (int8): its bytes × fp32 as the table shows them, its decode speed's
    assert values(md) == ["0.27×", "1.8×"]
    assert "int8 bytes ÷ fp32<" in md and "int8 decode ÷ fp32<" in md
    assert notes(md) == ["measured: 135.0 MB", "measured 18.0 vs 10.0 tok/s: faster"]


def test_mode_cards_say_faster_only_above_one(modes):
    slow = [modes[0], replace(modes[2], decode_tokens_per_s=9.0)]
    md = quant_charts.mode_cards_html(slow, QUIET)
    assert values(md)[-1] == "0.90×" and notes(md)[-1].endswith("tok/s: not faster")
    assert ": faster" not in md
    # between 1 and the roofline title's 1.2 the card agrees with the title: not faster
    edge = [modes[0], replace(modes[2], decode_tokens_per_s=11.0)]
    assert notes(quant_charts.mode_cards_html(edge, QUIET))[-1].endswith("tok/s: not faster")
    assert "not faster here" in roofline_charts.roofline_title(edge, 20.0, QUIET)


def test_a_busy_comparison_keeps_its_numbers_and_draws_no_word(modes):
    md = quant_charts.mode_cards_html(modes, BUSY_RUN)
    assert values(md) == ["0.27×", "1.8×"]  # measured: they stand
    assert notes(md)[-1] == "measured 18.0 vs 10.0 tok/s: noisy, busy machine"
    assert "faster" not in md
    running = quant_charts.mode_cards_html(modes)  # not judged yet: no word either
    assert "faster" not in running and notes(running)[-1].endswith("tok/s: so far")


def test_mode_cards_while_only_float32_is_measured(modes):
    md = quant_charts.mode_cards_html(modes[:1])
    assert values(md) == ["10.0", "—"] and "fp32 decode tok/s" in md and "next mode" in md
