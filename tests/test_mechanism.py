"""The mechanism diagram, built from hand-made engine records (no model).

The HTML is parsed back into lanes and strips, and the drawn numbers are checked against the
records: cells per layer-group strip = cached positions (prompt and generated apart), the new
cells of a beat, each beat's duration = measured seconds × the slow-down factor.
"""
from __future__ import annotations

import re
from html.parser import HTMLParser
from types import SimpleNamespace

import pytest

from inference.events import StepEvent
from visualizations.mechanism import (
    batch_diagram,
    decode_diagram,
    layer_groups,
    nice_capacity,
    prefill_diagram,
    quant_diagram,
    race_diagram,
    slow_factor,
)
from visualizations.mechanism_svg import FACTORS, mechanism_css

PROMPT = ["<|im_start|>", "user", "\n", "Write", " one", " sentence", "<|im_end|>", "\n"]
P = len(PROMPT)


def step(index: int, seconds: float, forward_tokens: int | None = None) -> StepEvent:
    fwd = forward_tokens if forward_tokens is not None else (P if index == 0 else 1)
    return StepEvent(index=index, token_id=100 + index, piece=f" w{index}", text="",
                     special=False, candidates=(), chosen_by="greedy", forward_tokens=fwd,
                     forward_seconds=seconds * 0.9, seconds=seconds, cache_tokens=P + index,
                     cache_bytes=0)


def steps(n: int, prefill_s: float = 0.2, decode_s: float = 0.05) -> list[StepEvent]:
    return [step(0, prefill_s)] + [step(i, decode_s) for i in range(1, n)]


class Drawn(HTMLParser):
    """The diagram read back: root attributes, lanes with their strips and cell runs."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.root: dict = {}
        self.lanes: list[dict] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if "mech" in classes and tag == "div":
            self.root = a
        elif "mech-lane" in classes:
            self.lanes.append({**a, "strips": []})
        elif "mech-strip" in classes:
            self.lanes[-1]["strips"].append({**a, "runs": []})
        elif "mech-cells" in classes:
            kind = "prompt" if "mech-cells-p" in classes else "generated"
            self.lanes[-1]["strips"][-1]["runs"].append(
                (kind, int(a["data-cells"]), a["data-new"] == "1", float(a["width"])))

    handle_startendtag = handle_starttag


def cells(strip: dict, kind: str | None = None, new: bool | None = None) -> int:
    return sum(n for k, n, is_new, _ in strip["runs"]
               if (kind is None or k == kind) and (new is None or is_new == new))


def measured_s(lane: dict) -> float:
    return float(re.search(r"--measured:([\d.]+)s", lane["style"]).group(1))


def test_layers_are_drawn_in_groups_and_said_so():
    assert layer_groups(30) == tuple((lo, lo + 2) for lo in range(1, 31, 3))
    assert layer_groups(8) == tuple((i, i) for i in range(1, 9))
    assert layer_groups(32)[-1] == (29, 32) and len(layer_groups(32)) == 8
    page = decode_diagram(PROMPT, steps(3), 30)
    drawn = Drawn(page)
    assert drawn.root["data-layers"] == "30" and drawn.root["data-groups"] == "10"
    assert len(drawn.lanes[0]["strips"]) == 10
    assert "30 layers drawn as 10 groups of 3" in page
    assert "layers 28–30" in page and "layers 1–3" in page


@pytest.mark.parametrize("n", [1, 2, 5, 12])
def test_every_strip_holds_one_cell_per_cached_position(n):
    events = steps(n)
    lane = Drawn(decode_diagram(PROMPT, events, 30, capacity=P + 16)).lanes[0]
    assert int(lane["data-cached"]) == events[-1].cache_tokens == P + n - 1
    for strip in lane["strips"]:
        assert cells(strip) == events[-1].cache_tokens
        assert cells(strip, "prompt") == P and cells(strip, "generated") == n - 1
        # the beat appends what its forward pass fed: the whole prompt, then one token
        assert cells(strip, new=True) == (P if n == 1 else 1)
        assert strip["data-new-cells"] == str(P if n == 1 else 1)


def test_cells_keep_their_width_while_the_cache_grows():
    widths = set()
    for n in (1, 4, 9):
        lane = Drawn(decode_diagram(PROMPT, steps(n), 30, capacity=P + 16)).lanes[0]
        for _kind, count, _new, width in lane["strips"][0]["runs"]:
            widths.add(round(width / count, 1))
    assert len(widths) == 1
    assert nice_capacity(17) == 32 and nice_capacity(16) == 16


def test_prefill_beat_fills_every_strip_with_the_prompt_at_once():
    page = prefill_diagram(PROMPT, steps(2), 30)
    prefill, decode = Drawn(page).lanes
    assert prefill["data-kind"] == "prefill" and decode["data-kind"] == "decode"
    for strip in prefill["strips"]:
        assert cells(strip, "prompt", new=True) == P and cells(strip, "generated") == 0
    assert f"{P} tokens fed together" in page
    for strip in decode["strips"]:
        assert cells(strip) == P + 1 and cells(strip, "generated", new=True) == 1


def test_a_refill_after_a_freed_cache_feeds_everything_again():
    events = steps(4)[:-1] + [step(3, 0.3, forward_tokens=P + 3)]
    lane = Drawn(decode_diagram(PROMPT, events, 30)).lanes[0]
    assert lane["data-kind"] == "prefill"
    assert cells(lane["strips"][0], new=True) == P + 3


def test_branch_rewinds_the_strips():
    long, rewound = steps(8), steps(3)
    assert cells(Drawn(decode_diagram(PROMPT, long, 30)).lanes[0]["strips"][0]) == P + 7
    assert cells(Drawn(decode_diagram(PROMPT, rewound, 30)).lanes[0]["strips"][0]) == P + 2


def test_beat_lasts_measured_seconds_times_the_factor():
    assert slow_factor(0.05) == 20 and slow_factor(0.21) == 5 and slow_factor(3.0) == 1
    for seconds in (0.01, 0.05, 0.3):
        events = [step(0, 0.2), step(1, seconds)]
        page = decode_diagram(PROMPT, events, 30)
        drawn = Drawn(page)
        factor = int(drawn.root["data-factor"])
        assert factor == slow_factor(seconds)
        assert measured_s(drawn.lanes[0]) == pytest.approx(seconds)
        assert float(drawn.root["data-beat-ms"]) == pytest.approx(seconds * 1000)
        assert f"{seconds * 1000:,.1f} ms" in page  # the real figure printed beside it
        assert (f"slowed {factor}×: 1 s on screen = {1000 / factor:g} ms measured" in page)
    # the beat's on-screen length is measured × factor, in the CSS
    css = mechanism_css()
    assert "--beat: calc(var(--measured) * var(--slow))" in css
    assert "animation-duration: calc(var(--beat) * var(--for))" in css
    for f in FACTORS:
        assert f".mech-s{f}:checked ~ .mech-stage {{ --slow: {f}; }}" in css


def test_a_given_factor_is_used_and_offered():
    page = decode_diagram(PROMPT, steps(2), 30, factor=50)
    assert Drawn(page).root["data-factor"] == "50"
    assert re.search(r"id='[^']+-s50' [^>]*checked", page)
    assert "slowed 50×: 1 s on screen = 20 ms measured" in page


def test_race_lanes_share_one_factor_and_keep_their_measured_ratio():
    race = []
    for i in range(3):
        race.append(SimpleNamespace(index=i, lane="cached", token_id=7 + i, sequence=P + i,
                                    forward_tokens=P if i == 0 else 1, seconds=0.05))
        race.append(SimpleNamespace(index=i, lane="recompute", token_id=7 + i, sequence=P + i,
                                    forward_tokens=P + i, seconds=0.2))
    page = race_diagram(PROMPT, race, 30, output=[" a", " b", " c"])
    cached, plain = Drawn(page).lanes
    assert measured_s(plain) / measured_s(cached) == pytest.approx(4.0)
    assert cells(cached["strips"][0]) == P + 2 and cells(cached["strips"][0], new=True) == 1
    assert all(cells(s) == 0 for s in plain["strips"])
    assert f"{P + 2} tokens fed again" in page and "nothing kept" in page
    assert Drawn(page).root["data-step"] == "2"


def test_reduced_motion_shows_the_end_state_and_no_script():
    page = decode_diagram(PROMPT, steps(3), 30)
    assert "@media (prefers-reduced-motion: reduce)" in page
    assert re.search(r"prefers-reduced-motion: reduce\)\s*\{\s*\.mech-stage \* \{ "
                     r"animation: none !important; \}", page)
    assert "<script" not in page.lower()
    for control in ("↻ Replay", "⏸ Pause", "slow-down:"):
        assert control in page


def test_empty_states_say_what_to_press():
    for page, button in ((decode_diagram(PROMPT, [], 30), "Step"),
                         (prefill_diagram(PROMPT, [], 30), "Prefill it"),
                         (race_diagram(PROMPT, [], 30), "Race")):
        drawn = Drawn(page)
        assert "mech-empty" in drawn.root["class"] and button in page
        assert len(drawn.lanes[0]["strips"]) == 10
        assert all(cells(s) == 0 for s in drawn.lanes[0]["strips"])


def test_token_text_is_escaped():
    events = [step(0, 0.1), StepEvent(index=1, token_id=1, piece="<b>&", text="", special=False,
                                      candidates=(), chosen_by="greedy", forward_tokens=1,
                                      forward_seconds=0.05, seconds=0.05, cache_tokens=P + 1,
                                      cache_bytes=0)]
    page = decode_diagram(["<img src=x>"] + PROMPT[1:], events, 30)
    assert "<img" not in page and "<b>&" not in page


# ---- lessons 5 and 6: rows sharing one pass, fewer bytes per weight ----

def batch_point(batch: int, step_s: float, prompt: int = 14, steps: int = 4) -> SimpleNamespace:
    return SimpleNamespace(batch=batch, prompt_tokens=prompt, step_seconds=step_s,
                           step_times=(step_s,) * steps, weight_bytes=538_000_000,
                           cache_bytes=46_080 * batch * (prompt + 1 + steps))


def test_batch_beat_feeds_b_rows_through_one_weight_read():
    points = [batch_point(1, 0.080), batch_point(2, 0.085), batch_point(8, 0.120)]
    page = batch_diagram(points, 30, bandwidth_gbs=20.0)
    one, big = Drawn(page).lanes
    assert (one["data-rows"], big["data-rows"]) == ("1", "8")
    assert measured_s(big) == pytest.approx(0.120) and measured_s(one) == pytest.approx(0.080)
    for strip in big["strips"]:  # per row: the prompt, the warm-up token and 4 timed tokens
        assert cells(strip, "prompt") == 14 and cells(strip, "generated") == 5
        assert cells(strip, new=True) == 1
    assert page.count("class='mech-row'") == 8 + 1  # a bar per row in each block that climbs
    assert "8 rows, 1 token each" in page and "× 8 rows" in page and "1 row, 1 token" in page
    assert "weights read once: 538 MB" in page
    assert "measured step <b>120.0 ms</b> = 66.7 tokens/s in total" in page
    assert "batch 1: <b>80.0 ms</b> = 12.5 tokens/s" in page
    assert "8× the rows took 1.50× the step time" in page
    floor = (538_000_000 + 46_080 * 8 * 19) / 20e9
    assert f"(weights + KV cache bytes) ÷ 20.0 GB/s measured = {floor * 1000:,.1f} ms" in page
    assert "faster" not in page and "busy" not in page


def test_batch_beat_alone_busy_and_empty():
    page = batch_diagram([batch_point(1, 0.05)], 30)
    (lane,) = Drawn(page).lanes
    assert lane["data-rows"] == "1" and "theoretical" not in page  # no bandwidth: no floor
    assert Drawn(decode_diagram(PROMPT, steps(2), 30)).lanes[0]["data-rows"] == "0"
    busy = batch_diagram([batch_point(1, 0.05), batch_point(4, 0.04)], 30,
                         noise=SimpleNamespace(busy=True))
    assert "This machine was busy while measuring" in busy
    assert "4× the rows took 0.80× the step time" in busy  # the numbers, not a verdict
    empty = batch_diagram([], 30)
    assert "mech-empty" in Drawn(empty).root["class"] and "Run sweep" in empty


def mode_report(key: str, label: str, weight_bytes: int, tokens_per_s: float,
                n: int = 8) -> SimpleNamespace:
    return SimpleNamespace(key=key, label=label, weight_bytes=weight_bytes,
                           bytes_per_token=weight_bytes - 2_000, decode_tokens_per_s=tokens_per_s,
                           prompt_tokens=P, pieces=tuple(f" t{i}" for i in range(n)))


def test_quant_beat_reads_fewer_bytes_per_weight():
    params = 100_000_000
    reports = [mode_report("fp32", "float32", 4 * params, 12.5),
               mode_report("fp16", "float16", 2 * params, 20.0),
               mode_report("int8", "int8 weight-only", 106_000_000, 25.0)]
    page = quant_diagram(reports, 30, params, bandwidth_gbs=20.0)
    fp32, int8 = Drawn(page).lanes  # float32 beside the newest mode measured
    assert measured_s(fp32) == pytest.approx(0.080) and measured_s(int8) == pytest.approx(0.040)
    assert "4.00 B/weight · 400 MB read" in page and "1.06 B/weight · 106 MB read" in page
    assert "float32: 4.00 B per weight, 400 MB read per step, measured <b>80.0 ms</b>" in page
    assert "int8: 0.26× the bytes, 0.50× the step time" in page
    assert "bytes read ÷ 20.0 GB/s measured: fp32 20.0 ms, int8 5.3 ms" in page
    for strip in int8["strips"]:  # the last decode step: prompt + 7 generated, 1 new
        assert cells(strip) == P + 7 and cells(strip, new=True) == 1
    assert "fp16" not in page and "faster" not in page


def test_quant_beat_fp32_alone_busy_and_empty():
    page = quant_diagram([mode_report("fp32", "float32", 400, 10.0)], 30, 100,
                         noise=SimpleNamespace(busy=True))
    assert len(Drawn(page).lanes) == 1 and "4.00 B per weight" in page
    assert "This machine was busy while measuring" in page and "theoretical" not in page
    empty = quant_diagram([], 30, 100)
    assert "mech-empty" in Drawn(empty).root["class"] and "Compare modes" in empty
