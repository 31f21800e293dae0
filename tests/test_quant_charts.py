"""Lesson 6 and roofline figure, table and text builders on hand-made reports (no model)."""
from dataclasses import dataclass, replace

import pytest

from chart_reading import caption_text
from inference.experiments.noise import judge
from inference.experiments.quality import ModeReport
from inference.experiments.roofline import Roofline, ceiling_tokens_per_s
from visualizations import quant_charts as charts
from visualizations import roofline_charts, step_charts


def report(key, wbytes, tps, top1=1.0, ids=(1, 2, 3), pieces=("The", " sky", " is")) -> ModeReport:
    return ModeReport(key=key, label=f"{key} label", kernel="dense matmul", head_treatment="tied",
                      weight_bytes=wbytes, bytes_per_token=wbytes, ratio_to_fp32=wbytes / 500e6,
                      prompt_tokens=20, prefill_seconds=0.1, decode_tokens_per_s=tps,
                      text_tokens=400,
                      text_prefill_seconds=0.5, token_ids=tuple(ids), pieces=tuple(pieces),
                      top1_agreement=top1, top1_decided=1.0, decided_positions=50,
                      kl_mean=0.01, perplexity=12.5)


@pytest.fixture
def reports():
    return [report("fp32", 500e6, 10.0),
            report("int8", 125e6, 20.0, 0.97, (1, 5, 3), ("The", " air", " is"))]


def test_ceiling_is_bandwidth_over_bytes():
    assert roofline_charts.ceiling_at(20.0, 500e6) == pytest.approx(40.0)
    assert roofline_charts.ceiling_at(20.0, 0) == 0.0
    # the chart's curve and the engine's roofline use the same formula
    assert roofline_charts.ceiling_at(22.5, 541e6) == pytest.approx(
        ceiling_tokens_per_s(22.5, 541e6))


def test_roofline_has_ceiling_and_one_point_per_mode(reports):
    fig = roofline_charts.roofline_figure(reports, 20.0, ", read-only sum, measured", "caption")
    ceiling, *points = fig.data
    assert "theoretical" in ceiling.name and "20.0 GB/s" in ceiling.name
    assert ceiling.y[0] == pytest.approx(20e9 / (ceiling.x[0] * 1e6))  # x in MB
    assert [p.name for p in points] == ["fp32 (measured)", "int8 (measured)"]
    # each point labelled where it is drawn, the ceiling on its curve: no legend, one height
    # for any number of modes
    assert [p.text for p in points] == [("fp32",), ("int8",)]
    assert not fig.layout.showlegend
    assert [a.text for a in fig.layout.annotations] == ["ceiling (theoretical)"]
    more = roofline_charts.roofline_figure(reports * 3, 20.0)
    assert more.layout.height == fig.layout.height
    assert points[1].x[0] == pytest.approx(125.0) and points[1].y[0] == 20.0
    assert "12%" in points[1].hovertemplate  # 20 tok/s of a 160 tok/s ceiling
    assert "MB" in fig.layout.xaxis.title.text and "tokens/s" in fig.layout.yaxis.title.text
    # the axis says what its bytes count; "weight bytes" only when told so
    assert not fig.layout.xaxis.title.text.startswith("Weight")
    weights_only = roofline_charts.roofline_figure(reports, 20.0,
                                                  x_title=roofline_charts.WEIGHT_BYTES_AXIS)
    assert "KV cache not counted" in weights_only.layout.xaxis.title.text.replace("<br>", " ")


def test_roofline_title_says_what_the_run_measured(reports):
    """The title once claimed "fewer bytes, faster decode" over modes that all decoded at
    9-11 tokens/s; now it says what this run found."""
    quiet, busy = judge(others_cpu=0.02), judge(others_cpu=0.6)
    shown = caption_text(roofline_charts.roofline_figure(reports, 20.0, noise=quiet))
    assert shown.startswith("Fewer bytes per token, faster decode here: int8 2.0× fp32.")
    flat = [reports[0], replace(reports[1], decode_tokens_per_s=10.5)]
    title = roofline_charts.roofline_title(flat, 20.0, quiet)
    assert title.startswith("Fewer bytes per token, not faster here: int8 10.5 vs fp32 10.0")
    # a busy run, or one not yet judged (still running), names both speeds and no verdict
    for noise in (busy, None):
        title = roofline_charts.roofline_title(reports, 20.0, noise)
        assert "faster" not in title and "int8 20.0 vs fp32 10.0 tokens/s" in title, title
    assert "busy machine" in roofline_charts.roofline_title(reports, 20.0, busy)
    alone = roofline_charts.roofline_title(reports[:1], 20.0)  # fp32: 10 of a 40 tok/s ceiling
    assert alone == "Decode here: 10.0 tokens/s, 25% of the bandwidth ceiling"


def test_lesson_6_roofline_has_one_height_for_any_verdict_caption_and_speed(reports):
    """Lesson 6's run button, cards and roofline share one 1280×720 screen only if the chart
    stays short whatever its note says: a busy, unfinished, faster or not-faster run, a caption
    naming chats, three-digit speeds (a GPU). A prefix on the busy note once made it a line
    taller than the quiet one, past the screen on a busy CI machine."""
    from types import SimpleNamespace

    from lessons.quantization_panel import ROOFLINE_HEIGHT
    from visualizations.style import info_caption
    info = SimpleNamespace(device="cuda", dtype="float32", threads=16)
    caption = info_caption(info, dtype="dtype per mode", chats=123)
    fast = [reports[0], replace(reports[1], decode_tokens_per_s=999.9)]
    flat = [replace(reports[0], decode_tokens_per_s=888.8),
            replace(reports[1], decode_tokens_per_s=999.9)]
    heights = {roofline_charts.roofline_figure(r, 2000.0, ", read-only sum, measured", caption,
                                               roofline_charts.WEIGHT_BYTES_AXIS,
                                               ROOFLINE_HEIGHT, noise).layout.height
               for r in (reports, fast, flat)
               for noise in (None, judge(others_cpu=0.02), judge(others_cpu=0.6))}
    assert max(heights) <= 420, heights  # the browser fit had 432 px for it at 1280×720


def test_weights_origin_note_follows_the_source():
    """GGUF quantization is named only where the GGUF was loaded, with the
    head's Q8_0 beside the linear layers' Q4_1."""
    from inference.loading import GGUF_CACHE_SOURCE, GGUF_SOURCE
    for source in (GGUF_SOURCE, GGUF_CACHE_SOURCE):
        note = charts.weights_origin_md(source, "float16")
        assert "**Q4_1**" in note and "**Q8_0**" in note and "float16" in note
        assert "from 8 to 4 bits" in note
    for source in ("Hugging Face Hub", "local folder"):
        note = charts.weights_origin_md(source)
        assert "GGUF" in note and "not quantized" in note
        assert "Q4_1" not in note and "Q8_0" not in note and "4-bit" not in note


def test_empty_figures_say_what_to_do():
    assert "Compare modes" in roofline_charts.roofline_figure([], 0.0).layout.annotations[0].text
    assert charts.mode_bars_figure([]).layout.annotations


def test_bars_show_size_speed_agreement_perplexity(reports):
    fig = charts.mode_bars_figure(reports, "caption")
    assert len(fig.data) == 4
    assert list(fig.data[0].y) == [500.0, 125.0]
    assert list(fig.data[1].y) == [10.0, 20.0]
    assert list(fig.data[2].y) == pytest.approx([100.0, 97.0])
    assert list(fig.data[3].x) == ["fp32", "int8"]


def test_table_rows(reports):
    headers, rows = charts.mode_table(reports)
    assert len(rows) == 2 and len(rows[0]) == len(headers)
    assert rows[1][:3] == ["int8", 125.0, 0.25] and rows[1][7] == 97.0
    assert rows[1][5] == "0.50 (400 tok)"
    assert rows[1][8] == "100 (50 positions)" and rows[1][-1] == "dense matmul"


def test_side_by_side_highlights_only_differing_tokens(reports):
    out = charts.side_by_side_html(reports)
    assert out.count("q6-diff") == 1 and " air" in out
    assert "identical to fp32" in out and "first differs at token 2 of 3" in out
    assert charts.first_difference((1, 2, 3), (1, 2, 3)) is None
    assert charts.first_difference((1, 2, 3), (1, 2)) == 2


def test_side_by_side_escapes_html(reports):
    bad = replace(reports[1], pieces=("<b>", " sky", " is"), token_ids=(9, 2, 3))
    out = charts.side_by_side_html([reports[0], bad])
    assert "<b>" not in out.split("</small>", 1)[1].replace("<b>fp32</b>", "").replace(
        "<b>int8</b>", "") and "&lt;b&gt;" in out


@dataclass(frozen=True)
class Info:
    device: str = "cpu"
    threads: int = 2


def test_results_table_markdown_has_one_row_per_mode(reports):
    assert charts.results_table_md([]) == ""
    lines = charts.results_table_md(reports).splitlines()
    headers, _ = charts.mode_table(reports)
    assert len(lines) == 4 and lines[1] == "|" + "---|" * len(headers)
    assert lines[3].startswith("| int8 | 125.0 | 0.25 |")


def test_closing_note_reports_this_run(reports):
    empty = charts.closing_note_md(Info(), [], None)
    assert "(cpu, 2 threads)" in empty and "Compare modes" in empty
    md = charts.closing_note_md(Info(), reports, 20.0)
    assert "read bandwidth 20.0 GB/s measured" in md
    assert "- **int8**: 125 MB (0.25× fp32), decode **20.0 tokens/s**" in md
    assert "top-1 agreement **97%**" in md
    assert "Fastest decode here: **int8**, 2.0× float32." in md
    # headline cards first, then a blank line, or markdown swallows the list into the HTML
    assert "<span class='lab-big-value'>2.0× fp32</span>" in md  # int8 decode vs fp32
    assert "</div>\n\n" in md and md.index("</div>\n\n") < md.index("- **fp32**")
    assert "bfloat16" not in md
    slow_bf16 = replace(reports[1], key="bf16", decode_tokens_per_s=5.0)
    both = [reports[0], slow_bf16]
    # the CPU's lack of bfloat16 is said only where its flags were checked
    assert "no native bfloat16" in charts.closing_note_md(Info(), both, 20.0, False)
    for unchecked in (None, True):  # a GPU / unreadable flags, or a CPU that has it
        md = charts.closing_note_md(Info(), both, 20.0, unchecked)
        assert "decoded slower than float32" in md and "native" not in md


def test_roofline_text_says_measured_and_theoretical():
    r = Roofline(bandwidth_gbs=20.0, bytes_per_token=500_000_000, measured_tokens_per_s=10.0)
    md = step_charts.roofline_md(r, 480_000_000)
    assert "20.0 GB/s ÷ 500.0 MB = **40.0 tokens/s**" in md  # the ceiling, theoretical
    assert "**10.0 tokens/s**, **25%** of the ceiling" in md
    assert "(measured)" in md and "(theoretical)" in md and "480.0 MB of weights" in md
    assert "512 MiB (537 MB) buffer" in md and "512 MB buffer" not in md  # units said exactly
    assert "*int8*: one byte" in charts.head_treatment_md({"int8": "one byte"})


def test_closing_note_on_a_busy_run_draws_no_verdict(reports):
    from inference.experiments.noise import judge

    busy = judge(calibration_ratio=1.9)
    slow_bf16 = replace(reports[1], key="bf16", decode_tokens_per_s=5.0)
    md = charts.closing_note_md(Info(), [reports[0], slow_bf16], 20.0, False, busy)
    assert "numbers are noisy — run again" in md and "decode **5.0 tokens/s**" in md
    assert "Fastest" not in md and "slower than float32" not in md and "No verdict" in md
    quiet = charts.closing_note_md(Info(), reports, 20.0, None, judge(others_cpu=0.01))
    assert "Fastest decode here" in quiet and "Machine quiet while measuring" in quiet
