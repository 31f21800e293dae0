"""Sentences a screen shows, read for hand-made records where they used to say something
untrue: a prompt partly read from the prefix cache, a prompt chunked over several passes, a
wait for a row, a slower draft that kept every guess, a launch-bound GPU-like step, a ratio
just above 1. Pure functions only: no model is loaded."""
from __future__ import annotations

import html
import re
from types import SimpleNamespace

from inference.events import StepEvent
from inference.experiments.noise import judge
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
    head = text(decode_diagram([f"t{i}" for i in range(600)], [ev], 30))
    assert "3 passes (chunked prefill)" in head
    assert "last pass measured" in head  # the event's seconds time its last chunk's pass


def test_a_wait_for_a_row_is_named_in_the_first_token_time():
    said = live_stats_md(0.45, 0.0, 0, 35, first_event(35), queued_s=0.3)
    assert "35 prompt tokens computed in one pass, after 300 ms waiting to join the batch" in said
    assert "waiting" not in prompt_work(first_event(35), queued_s=0.004)  # a wake-up, no queue


def test_another_engine_claims_nothing_about_its_cache():
    ev = first_event(35, passes=0)  # a remote engine's event: passes unknown
    assert prompt_work(ev) == "35 prompt tokens"


def spec_summary(**kw):
    from inference.experiments.speculative_race import SpecRaceSummary
    base = dict(draft="int4", k=4, prompt_tokens=40, new_tokens=51, identical=True, passes=10,
                proposed=40, accepted=40, spec_seconds=2.5, draft_seconds=1.5, plain_seconds=2.0,
                plain_step_seconds=(0.04,) * 50, bandwidth_gbs=22.5, bytes_per_token=541_000_000,
                noise=0.05, judged=40, draft_bytes_per_step=84_000_000)
    return SpecRaceSummary(**{**base, **kw})


def test_a_slower_draft_that_kept_every_guess_is_not_called_faster():
    from visualizations.glossary import TERMS
    s = spec_summary()  # every guess kept, 5 tokens per pass, yet 0.8× plain decoding
    assert s.acceptance == 1.0 and s.tokens_per_pass == 5 and s.verdict == "slower"
    said = TERMS["acceptance"][1]
    assert "means faster" not in said and "fewer passes of the big model" in said
    assert "faster only if" in said


def test_the_speculative_ceiling_counts_the_drafts_own_weight_reads():
    from visualizations.speculative_charts import ceiling_sentence
    s = spec_summary(spec_seconds=5.0)  # 10 tokens/s: below every ceiling
    with_draft = 22.5e9 * 5 / (541e6 + 4 * 84e6)  # 128: not 41.6 × 5 = 208
    assert abs(s.pass_ceiling_tokens_per_s - with_draft) < 0.1
    said = ceiling_sentence(s, None)  # no noise reading: the figures, no place named
    assert f"{s.ceiling_tokens_per_s * 5:.1f}" not in said
    said = ceiling_sentence(s, SimpleNamespace(busy=False))  # a quiet run
    assert f"{with_draft:.1f}" in said and "draft's own weight reads" in said
    assert f"{s.ceiling_tokens_per_s * 5:.1f}" not in said


def test_glossary_sentences_hold_beyond_batch_one_and_exact_arithmetic():
    from visualizations.glossary import TERMS
    roof = TERMS["roofline"][1]
    assert "batch" in roof and "1" in roof  # the bandwidth ceiling is the one-token-per-pass one
    for key in ("preemption", "speculative", "greedy"):
        said = TERMS[key][1]
        assert "near-tie" in said or "exact arithmetic" in said, key
    assert "block number p" not in TERMS["blocktable"][1]  # the entry p ÷ size names the block
    for key in ("kvheads", "headdim", "gguf"):  # a model fact names its model
        assert "SmolLM2-135M" in TERMS[key][1], key


QUIET = judge(spread=0.03, others_cpu=0.02)  # a run the noise rule judged quiet


def test_a_ratio_of_1_1_is_called_faster_or_cheaper_nowhere():
    """One margin for every ratio verdict: 1.1 is within it, at every site that says faster."""
    from lessons.common.predictions import measured_with_unit
    from lessons.presenter_lines import ratio_label
    from visualizations import kv_text, timing_text
    from visualizations.cards import SAME_WITHIN, ratio_side
    from visualizations.first_screen import race_ratio_html
    assert ratio_side(1.1) == "same" and SAME_WITHIN == 1.1
    assert ratio_side(1.11) == "faster" and ratio_side(0.9) == "slower"
    assert "faster" not in ratio_label(1.1, "faster with the cache", "recomputing ÷ cached",
                                       "24 tokens").replace("not faster", "")
    assert "(not faster on this run)" in measured_with_unit(1.1, "× faster")
    m = SimpleNamespace(prompt_tokens=100, prefill_seconds=1.0, ttft_seconds=1.0,
                        decode_step_seconds=0.011, decode_steps=4)  # 0.010 vs 0.011 per token
    card, said = timing_text.per_token_verdict(m, QUIET)
    assert "cheaper" not in card.label and "less than a decode step" not in " ".join(said)
    assert "about what a decode step spends" in " ".join(said)
    from inference.experiments.prefill_sweep import PrefillPoint
    pts = [PrefillPoint(64, 0.10, 0.11, True)]
    assert "faster" not in timing_text.sweep_verdict_md(pts, QUIET).replace("not faster", "")
    from inference.experiments.kv_race import RaceSummary
    race = RaceSummary(prompt_tokens=20, new_tokens=4, cached_seconds=1.0, recompute_seconds=1.1,
                       cached_forward_tokens=23, recompute_forward_tokens=86, same_tokens=True,
                       max_logit_gap=0.0)
    assert "faster" not in kv_text._verdict(race.speedup)
    assert "saved" not in race_ratio_html(race, QUIET)


def test_tokens_per_word_is_not_counted_for_text_without_spaces():
    from visualizations.token_view import token_counts_md
    assert "words not counted" in token_counts_md("本を読みます", 5)
    assert "**3** words" in token_counts_md("one two three", 6)


def test_presenter_why_lines_name_the_fixed_cost_not_only_weight_reads():
    """On an H200 a small model's pass is bound by launches: a why line that blames weight
    reads alone is wrong there."""
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "assets" / "presenter.md").read_text()
    whys = [line for line in text.splitlines() if line.startswith("why:")]
    for line in whys:
        if "weight" in line and ("pass" in line or "batch" in line):
            assert "launch" in line, line
    assert "unless it is labelled theoretical" in text


def test_time_outside_the_matrix_products_is_an_upper_bound_on_dispatch():
    from inference.experiments.roofline import decide_bound
    cpu = decide_bound(0.1, 0.02, overhead_share=0.7, device="cpu")
    assert cpu.kind == "dispatch" and "at most" in cpu.sentence and "attention" in cpu.sentence
    gpu = decide_bound(0.03, 0.01, overhead_share=0.7, device="cuda")  # an H200-like step
    assert gpu.kind == "launches" and "kernel launches" in gpu.sentence
    assert "dispatch" not in gpu.sentence


def test_the_ridge_sentence_leaves_the_bound_to_the_measured_column():
    """A GPU-like launch-bound decode: left of the ridge, yet not waiting for memory."""
    from inference.experiments.roofline import ComputeRoof, WorkPoint
    from visualizations.roofline_charts import compute_roof_md
    step = WorkPoint("decode, batch 1", flops=5.4e8, bytes_read=2.7e8, seconds=0.0188)
    roof = ComputeRoof(peak_gflops=400_000.0, bandwidth_gbs=4000.0, points=(step,))
    md = compute_roof_md(roof, "float16", QUIET)
    assert "waits for memory" not in md and "one 1024 × 1024" not in md
    assert "back to back" in md and "last column" in md
    assert "| memory |" not in md  # 0.4% of the bandwidth: not memory-bound


def test_the_compute_roof_times_a_run_of_products():
    from inference.experiments.roofline import measure_matmul_gflops
    assert measure_matmul_gflops("cpu", size=64, repeats=2, inner=3) > 0


def test_a_bigger_model_is_not_given_this_ones_share_of_its_ceiling():
    from visualizations.step_charts import model_sizes_md

    def row(name, params, weights, ceiling):
        return SimpleNamespace(shape=SimpleNamespace(name=name, parameters=params),
                               weight_bytes=weights, int8_bytes=weights // 4,
                               kv_bytes_per_token=1000, ceiling_tokens_per_s=ceiling, fits=True)
    rows = [row("SmolLM2-135M", 135e6, 541e6, 41.6), row("SmolLM2-1.7B", 1.7e9, 6.8e9, 3.3)]
    md = model_sizes_md(rows, 22.5, "float32", 8 * 10**9, measured_tokens_per_s=13.6)
    assert "At the same share" not in md and "would give about" not in md
    assert "could not beat **3.3 tokens/s**" in md


def test_start_here_lists_every_numbered_lesson_and_the_three_kinds_of_figure():
    from pathlib import Path

    from lessons import TABS
    text = (Path(__file__).resolve().parents[1] / "assets" / "overview.md").read_text()
    for tab in TABS:
        if tab.label[0].isdigit():
            assert f"| {tab.label} |" in text, tab.label
    assert "**recorded**" in text and "**theoretical**" in text and "**measured**" in text


def test_the_cost_table_claims_no_step_the_code_does_not_take():
    from visualizations.batching_text import cost_table
    cost = SimpleNamespace(batch=8, measured_output_tokens_per_s=100.0, output_tokens_per_s=90.0,
                           usd_per_million_output=1.0, usd_per_million_input=0.1,
                           usd_per_conversation=0.001, conversations_per_hour=100,
                           context_tokens=350.0)
    md = cost_table([cost], 200, 300)
    assert "attention arithmetic" not in md and "ceiling" in md and "short prefill" in md


def test_the_vllm_comparison_says_which_backend_and_what_a_gpu_changes():
    from visualizations.server_view import peer_comparison_md
    side = SimpleNamespace(tokens_per_s=150.0, p95_latency_s=8.0, p95_ttft_s=2.0)
    c = SimpleNamespace(app=side, vllm=side, clients=30, new_tokens=48, vllm_version="0.32",
                        machine="2-core AMD EPYC", when="2026-12-02", here=True,
                        source="make bench-serving")
    md = peer_comparison_md(c)
    assert "CPU backend" in md and "One run each" in md and "On a GPU" in md


def test_a_simulated_mode_is_not_drawn_as_a_point_the_bandwidth_line_explains():
    from visualizations.roofline_charts import roofline_figure
    mode = SimpleNamespace(key="int4", label="int4 (simulated)", kernel="simulated (dequantize "
                           "on the fly)", bytes_per_token=84e6, decode_tokens_per_s=9.0)
    fast = SimpleNamespace(key="fp32", label="float32", kernel="PyTorch", bytes_per_token=541e6,
                           decode_tokens_per_s=13.0)
    fig = roofline_figure([fast, mode], 22.5)
    points = {t.name: t for t in fig.data if t.name and "(measured)" in t.name}
    assert list(points["int4 (measured)"].text) == ["int4 (simulated)"]
    assert points["int4 (measured)"].marker.symbol == "circle-open"
    assert "reads more" in points["int4 (measured)"].hovertemplate
    assert list(points["fp32 (measured)"].text) == ["fp32"]


def test_the_cached_step_grows_along_a_line_not_in_proportion():
    from visualizations.kv_text import growth_with_length_markdown
    point = SimpleNamespace(kv_bytes_per_token=23_040, weight_bytes=541_000_000, tokens=1000,
                            cache_share=0.04)
    md = growth_with_length_markdown(point)
    assert "cached step grows in proportion to L" not in md and "a line" in md
