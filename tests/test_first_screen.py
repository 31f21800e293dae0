"""The first screen on the real model: the live answer through the shared server (prefill
beat, then one-token beats, measured cards, the KV strip growing), and "Now without the cache"
ending on the race's measured ratio. Tokens are compared, not float bits (any device, dtype)."""
from __future__ import annotations

import re
from dataclasses import replace

from inference.config import LIMITS
from inference.generation import stream
from lessons.common.prompt_input import encode_prompt
from lessons.start_handlers import about_model_md, live_frames, live_race_frames
from polling import without_ticks
from visualizations.first_screen import live_cards_html, race_ratio_html

SETTINGS = replace(LIMITS, live_new_tokens=6, live_race_new_tokens=4,
                   chat_frames_per_s=1e9)  # a beat per pass, however fast the device


def _attr(html: str, name: str) -> str:
    return re.search(rf"data-{name}='([^']*)'", html).group(1)


def test_live_answer_streams_prefill_then_one_token_beats(lm, serving):
    frames = without_ticks(list(live_frames(lm, SETTINGS, serving, LIMITS.default_prompt)))
    ids = encode_prompt(lm, SETTINGS, LIMITS.default_prompt)
    assert "mech-empty" in frames[0].diagram and "—" in frames[0].cards  # says what will come
    beats = frames[1:]
    assert 1 <= len(beats) <= SETTINGS.live_new_tokens
    assert _attr(beats[0].diagram, "kind") == "prefill"
    assert _attr(beats[0].diagram, "cached") == str(len(ids))  # the whole prompt in one pass
    if len(beats) > 1:
        assert [_attr(b.diagram, "kind") for b in beats[1:]] == ["decode"] * (len(beats) - 1)
        cached = [int(_attr(b.diagram, "cached")) for b in beats]
        assert cached == list(range(len(ids), len(ids) + len(beats)))  # one column per step
        assert re.search(r"each next token.*?[\d,]+ ms", beats[-1].cards)
    assert re.search(r"first token</span><span class='lab-big-value'>[\d,]+ ms", beats[-1].cards)
    # the answer is the greedy answer (served by the batcher = generated alone)
    solo = [ev.text for ev in stream(lm, ids, max_new_tokens=SETTINGS.live_new_tokens)][-1]
    shown = beats[-1].answer.removeprefix("**The model's answer:** ").removesuffix(" ▍")
    assert shown == solo.replace(lm.tokenizer.eos_token, "")


def test_a_paced_live_answer_keeps_its_first_and_last_beats_and_every_token(lm, serving):
    """A class opening the page at once paces the beats (`chat_frames_per_s`): however slow
    the pace, the prefill beat and the finished answer are drawn, the last one with every
    pass in its KV strip and the whole greedy answer."""
    slow = replace(SETTINGS, chat_frames_per_s=1e-6)
    frames = without_ticks(list(live_frames(lm, slow, serving, LIMITS.default_prompt)))
    ids = encode_prompt(lm, slow, LIMITS.default_prompt)
    solo = list(stream(lm, ids, max_new_tokens=slow.live_new_tokens))
    waiting, *beats = frames
    assert "mech-empty" in waiting.diagram and _attr(beats[0].diagram, "kind") == "prefill"
    assert len(beats) == (2 if len(solo) > 1 else 1)  # the prefill beat, then the last one
    assert int(_attr(beats[-1].diagram, "cached")) == len(ids) + len(solo) - 1
    shown = beats[-1].answer.removeprefix("**The model's answer:** ").removesuffix(" ▍")
    assert shown == solo[-1].text.replace(lm.tokenizer.eos_token, "")


def test_race_ends_on_its_measured_ratio(lm):
    frames = list(live_race_frames(lm, SETTINGS, "Hi there"))
    assert "Racing" in frames[0].result
    # both lanes drawn from the first frame: the picture keeps its height when step 1 lands
    assert all(t in frames[0].diagram for t in ("with the KV cache", "without a cache"))
    last = frames[-1]
    assert len(frames) == 1 + SETTINGS.live_race_new_tokens
    assert _attr(last.diagram, "kind") == "decode" and "without a cache" in last.diagram
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
