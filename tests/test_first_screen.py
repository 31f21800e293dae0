"""The first screen on the real model: the live answer through the shared server (prefill
beat, then one-token beats, measured cards, the KV strip growing, each step said in plain words
from its measured record, the answer saying why it stops), and "Now without the cache" ending
on the race's measured ratio. Tokens are compared, not float bits (any device, dtype). The
picture's drawings keep every label at 13 user units (12 px at the smallest size shown)."""
from __future__ import annotations

import re
from dataclasses import replace
from itertools import accumulate
from types import SimpleNamespace

from inference.config import LIMITS
from inference.generation import stream
from lessons import start_handlers
from lessons.common.prompt_input import encode_prompt
from lessons.start_handlers import about_model_md, live_frames, live_race_frames
from polling import without_ticks
from visualizations import first_screen
from visualizations.first_screen import NARROW, WIDE, live_cards_html, race_ratio_html, step_line
from visualizations.noise_view import BUSY

SETTINGS = replace(LIMITS, live_new_tokens=6, live_race_new_tokens=4,
                   chat_frames_per_s=1e9)  # a beat per pass, however fast the device


def _attr(html: str, name: str) -> str:
    return re.search(rf"data-{name}='([^']*)'", html).group(1)


def _answer(shown: str) -> tuple[str, str | None]:
    """(the answer's text, why it stopped or None while it streams) from the answer's markdown."""
    m = re.fullmatch(r"\*\*The model's answer(?::\*\*|\*\* \((.*?)\):) (.*?)( ▍)?", shown,
                     re.S)
    assert m, shown
    return m.group(2), m.group(1)


def _step_said(picture: str) -> str:
    return re.search(r"<div class='fs-step'>(.*?)</div>", picture).group(1)


def test_live_answer_streams_prefill_then_one_token_beats(lm, serving):
    frames = without_ticks(list(live_frames(lm, SETTINGS, serving, LIMITS.default_prompt)))
    ids = encode_prompt(lm, SETTINGS, LIMITS.default_prompt)
    assert "fs-empty" in frames[0].diagram and "—" in frames[0].cards  # says what will come
    beats = frames[1:]
    assert 1 <= len(beats) <= SETTINGS.live_new_tokens
    assert _attr(beats[0].diagram, "kind") == "prefill"
    assert _attr(beats[0].diagram, "cached") == str(len(ids))  # the whole prompt in one pass
    if len(beats) > 1:
        assert [_attr(b.diagram, "kind") for b in beats[1:]] == ["decode"] * (len(beats) - 1)
        cached = [int(_attr(b.diagram, "cached")) for b in beats]
        assert cached == list(range(len(ids), len(ids) + len(beats)))  # one column per step
        assert re.search(r"each next token.*?[\d,]+ ms", beats[-1].cards)
    # a busy machine labels the card "noisy": the normal case under load
    assert re.search(r"first token( · noisy)?</span><span class='lab-big-value'>"
                     r"[\d,]+ ms", beats[-1].cards)
    # each step said in plain words, its time the one the picture's lane carries (measured)
    for k, b in enumerate(beats[1:], 1):
        said = re.fullmatch(rf"step {k}: the model read {len(ids) + k - 1} earlier tokens from "
                            r"its cache and wrote one more in ([\d,]+) ms", _step_said(b.diagram))
        assert said, _step_said(b.diagram)
        assert abs(float(said.group(1).replace(",", "")) - float(_attr(b.diagram, "ms"))) <= 0.5
    assert _step_said(beats[0].diagram).startswith(
        "step 0, the prompt: the model ") and "wrote the first token" in beats[0].diagram
    # the answer is the greedy answer (served by the batcher = generated alone), and says why
    # it stops where it does
    solo = list(stream(lm, ids, max_new_tokens=SETTINGS.live_new_tokens))
    text, why = _answer(beats[-1].answer)
    assert text == solo[-1].text.replace(lm.tokenizer.eos_token, "")
    assert why == (f"stopped after {SETTINGS.live_new_tokens} tokens: the first screen's "
                   "answer length" if solo[-1].finished == "max tokens" else
                   f"ended by the model after {len(solo)} tokens: it chose its end-of-turn token")
    assert all(_answer(b.answer)[1] is None for b in beats[:-1])  # streaming: no reason yet


def test_a_paced_live_answer_keeps_its_first_and_last_beats_and_every_token(lm, serving):
    """A class opening the page at once paces the beats (`chat_frames_per_s`): however slow
    the pace, the prefill beat and the finished answer are drawn, the last one with every
    pass in its KV strip and the whole greedy answer."""
    # no idle tick either: a step outlasting `stop_check_s` (a loaded machine) draws the text
    # waiting for its beat, rightly, and that frame would sit between the two counted here
    slow = replace(SETTINGS, chat_frames_per_s=1e-6, stop_check_s=600.0)
    frames = without_ticks(list(live_frames(lm, slow, serving, LIMITS.default_prompt)))
    ids = encode_prompt(lm, slow, LIMITS.default_prompt)
    solo = list(stream(lm, ids, max_new_tokens=slow.live_new_tokens))
    waiting, *beats = frames
    assert "fs-empty" in waiting.diagram and _attr(beats[0].diagram, "kind") == "prefill"
    assert len(beats) == (2 if len(solo) > 1 else 1)  # the prefill beat, then the last one
    assert int(_attr(beats[-1].diagram, "cached")) == len(ids) + len(solo) - 1
    assert _answer(beats[-1].answer)[0] == solo[-1].text.replace(lm.tokenizer.eos_token, "")
    assert beats[-1].noise is not None or len(solo) == 1  # the finished cards' reading
    assert beats[-1].noise is None or (BUSY.capitalize() in beats[-1].cards) == beats[-1].noise.busy


def test_cards_of_a_disturbed_answer_carry_the_busy_notice(lm, monkeypatch):
    """Hand-made gaps between tokens, every other one slowed 10×: the finished answer's cards
    read busy: each card says its figure is noisy, the notice with its reasons below them
    (the cards keep their place in the first view)."""
    ids = encode_prompt(lm, SETTINGS, LIMITS.default_prompt)
    events = list(stream(lm, ids, max_new_tokens=SETTINGS.live_new_tokens))
    assert len(events) == 6  # five gaps: enough repeats for a spread
    between = list(accumulate([0.05, 0.5, 0.05, 0.5, 0.05]))
    timed = [(events[0], 0.1, 0.0, 0)] + [(e, 0.1, b, k) for k, (e, b)
                                          in enumerate(zip(events[1:], between), 1)]
    monkeypatch.setattr(start_handlers, "timed_events", lambda req, idle_s: iter(timed))
    req = SimpleNamespace(ahead=0, queued_seconds=0.0, cancel=lambda: None)
    server = SimpleNamespace(submit=lambda *args: req)
    *earlier, last = list(live_frames(lm, SETTINGS, server, LIMITS.default_prompt))
    assert last.noise.busy and "varied by" in last.noise.reasons[0]
    assert last.cards.count(" · noisy</span>") == 2 and "ms" in last.cards
    assert last.cards.index("<div class='lab-busy'") > last.cards.index("each next token")
    assert all(f.noise is None and BUSY.capitalize() not in f.cards and "noisy" not in f.cards
               for f in earlier)


def test_race_ends_on_its_measured_ratio(lm):
    frames = list(live_race_frames(lm, SETTINGS, "Hi there"))
    assert "Racing" in frames[0].result
    # both lanes drawn from the first frame: the picture keeps its height when step 1 lands
    assert all(t in frames[0].diagram for t in ("with the KV cache", "without a cache"))
    last = frames[-1]
    assert len(frames) == 1 + SETTINGS.live_race_new_tokens
    assert _attr(last.diagram, "kind") == "decode" and "without a cache" in last.diagram
    n = len(encode_prompt(lm, SETTINGS, "Hi there", SETTINGS.race_max_prompt_tokens))
    said = _step_said(last.diagram)
    assert said.startswith(f"step {SETTINGS.live_race_new_tokens - 1}: with the cache the model "
                           f"fed 1 token and read {n + SETTINGS.live_race_new_tokens - 2} ")
    assert f"without it, it fed all {n + SETTINGS.live_race_new_tokens - 1} again" in said
    ratio = re.search(r"time without ÷ with the cache</span><span class='lab-big-value'>"
                      r"([\d.]+)×", last.result)
    assert ratio and float(ratio.group(1)) > 0
    busy = "numbers are noisy — run again" in last.result
    assert busy or "machine quiet while measuring" in last.result  # judged either way
    assert ("saved" in last.result or "variation" in last.result) != busy  # verdict iff quiet


def test_cards_and_ratio_empty_states_say_what_appears():
    assert "appears when the prompt&#x27;s prefill ends" in live_cards_html(None, None, 0, 0)
    assert "Press **Now without the cache**" in race_ratio_html(None)


def test_about_model_in_plain_words(lm):
    text = about_model_md(lm.info)
    assert lm.info.name in text and f"{lm.info.layers} layers" in text
    assert "GGUF" not in text and "Q4_1" not in text


def event(index: int, fed: int, cache: int, seconds: float, **extra) -> SimpleNamespace:
    return SimpleNamespace(index=index, forward_tokens=fed, cache_tokens=cache, seconds=seconds,
                           **extra)


def test_the_step_line_words_each_kind_of_pass_from_its_record():
    assert step_line(event(23, 1, 63, 0.1774)) == (
        "step 23: the model read 62 earlier tokens from its cache and wrote one more in 177 ms")
    assert step_line(event(0, 40, 40, 2.2161)) == (
        "step 0, the prompt: the model read all 40 tokens in one pass, kept their keys and "
        "values in its cache and wrote the first token in 2,216 ms")
    hit = step_line(event(0, 8, 40, 0.3, prefix_cached_tokens=32))
    assert "took 32 prompt tokens from its prefix cache, read the other 8 in one pass" in hit
    chunked = step_line(event(0, 600, 600, 0.9, prefill_passes=3))
    assert "read all 600 tokens in 3 passes" in chunked and "its last pass took 900 ms" in chunked
    assert "one pass" not in chunked
    shared = step_line(event(5, 1, 45, 0.05, batch_rows=4))
    assert shared.endswith("in 50 ms, sharing the pass with 3 other request(s)")
    assert "cache was freed" in step_line(event(7, 47, 47, 0.4))  # a refill is no decode step


def test_each_lane_is_drawn_wide_and_narrow_with_no_label_under_13_units():
    events = [event(0, 5, 5, 0.2, piece="x"), event(1, 1, 6, 0.05, piece=" y")]
    picture = first_screen.live_picture(list("abcde"), events, 30, capacity=12)
    wide, narrow = re.findall(r"<svg class='fs-(\w+)' viewBox='0 0 (\d+) ", picture)
    assert (wide, narrow) == (("wide", str(WIDE.width)), ("narrow", str(NARROW.width)))
    sizes = [float(x) for x in re.findall(r"font-size='([\d.]+)'", picture)]
    assert sizes and min(sizes) >= first_screen.FONT == 13
    assert picture.count("class='mech-strip'") == WIDE.groups + NARROW.groups
    assert "layers 1–6" in picture and ">1–10<" in picture  # a simpler phone picture
    # never shown smaller than its own size × 12/13: its box's basis, and the wide one only in
    # a box wider than it
    assert f"flex: 1 1 {round(NARROW.width * 12 / 13)}px" in picture
    assert first_screen.WIDE_FROM_PX >= WIDE.width * 12 / 13
