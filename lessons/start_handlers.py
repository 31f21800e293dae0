"""'Start here' handlers: the first screen's live answer (every forward pass drawn with its
measured time), its race against recomputation, the example prompts and the overview."""
from __future__ import annotations

import html
from collections.abc import Iterator
from typing import NamedTuple

from inference.config import LIMITS, Settings
from inference.experiments import noise
from inference.experiments.kv_race import RECOMPUTE, race, summarize
from inference.experiments.noise import Noise
from inference.sampling import SamplingSettings
from visualizations import first_screen
from visualizations.mechanism import RACE_TITLES
from visualizations.noise_view import busy_notice_html

from .common.client_timing import FramePace, timed_events
from .common.prompt_input import encode_prompt
from .kv_cache_handlers import race_repeats

STARTERS: tuple[str, ...] = (
    LIMITS.default_prompt,
    "What is 1234 * 5678?",
    "Translate to French: The cat sleeps on the warm windowsill.",
    "def fibonacci(n):",
    "Tell me a story about a robot 🤖 who loves gardening 🌱",
)
FIRST_STEP_MD = ("**Your first step:** tap a prompt. It opens **Try it** with the prompt filled "
                 "in; press **Generate** there and watch the answer stream.")


class LiveFrame(NamedTuple):
    diagram: str  # the mechanism diagram: the newest forward pass animated
    cards: str  # first token and each next token (measured), the busy notice below
    answer: str  # the answer so far, or what is happening
    noise: Noise | None = None  # the reading of the one-token steps' gaps (finished answer)


def live_frames(lm, settings: Settings, server, prompt: str) -> Iterator[LiveFrame]:
    """The first screen's answer from the server, a frame per token; the cards judge its gaps."""
    ids = encode_prompt(lm, settings, prompt)
    n = settings.live_new_tokens
    labels = [lm.tokenizer.decode([i]) for i in ids]  # the prompt as the model reads it
    req = server.submit(ids, SamplingSettings(), n)
    waiting = (f"Waiting for a free row: {req.ahead} request(s) ahead." if req.ahead else
               "Sending the prompt…")
    frame = LiveFrame(first_screen.empty_picture(lm.info.layers, waiting, "live"),
                      first_screen.live_cards_html(None, None, len(ids), 0), f"*{waiting}*")
    yield frame
    events, pace, behind = [], FramePace(settings.chat_frames_per_s), None
    gaps, so_far = [], 0.0  # wall seconds between successive tokens (the cards' repeats)
    try:
        for timed in timed_events(req, settings.stop_check_s):
            if timed is not None:
                ev, ttft, between, _ = timed
                events.append(ev)
                if ev.index > 0:
                    gaps.append(between - so_far)
                    so_far = between
                behind = (ttft, between, gaps if ev.finished else None)
                if not ev.finished and not pace.due(ev):  # a class is answered: draw it later
                    continue
            if behind is not None:  # else nothing new: the newest frame, where a tab click ends it
                frame, behind = _live_frame(lm, req, labels, events, n, *behind), None
            yield frame
    finally:
        req.cancel()  # Stop or a closed tab: the row is freed at the next step


def _live_frame(lm, req, labels: list[str], events: list, n: int, ttft: float,
                between: float, gaps: list[float] | None = None) -> LiveFrame:
    """The picture, cards and answer after the newest of `events` (`gaps`: the finished one's)."""
    ev, decoded = events[-1], len(events) - 1
    text = ev.text.replace(lm.tokenizer.eos_token, "")
    judged = noise.reading(gaps) if gaps else None
    return LiveFrame(
        first_screen.live_picture(labels, events, lm.info.layers, capacity=len(labels) + n),
        first_screen.live_cards_html(ttft, between / decoded if decoded else None, len(labels),
                                     decoded, ev.batch_rows, events[0], req.queued_seconds,
                                     busy=judged is not None and judged.busy)
        + busy_notice_html(judged),  # below: the cards keep their place in the one view
        (f"**The model's answer** ({stop_reason(ev, len(events), n)}): {html.escape(text)}"
         if ev.finished else f"**The model's answer:** {html.escape(text)} ▍"), judged)


def stop_reason(last, tokens: int, most: int) -> str:
    """Why the answer ends where it does; `most`: `Settings.live_new_tokens`."""
    if last.finished == "end of turn":
        return f"ended by the model after {tokens} tokens: it chose its end-of-turn token"
    if last.finished == "max tokens":
        return f"stopped after {most} tokens: the first screen's answer length"
    return f"ended after {tokens} tokens: {last.finished}"


class LiveRaceFrame(NamedTuple):
    diagram: str  # both lanes' newest step, side by side: with the cache, without it
    result: str  # the measured ratio (or what will appear), the busy notice when there was one


def live_race_frames(lm, settings: Settings, prompt: str) -> Iterator[LiveRaceFrame]:
    """Lesson 4's race on the first screen's prompt, ending on its ratio, judged quiet or busy."""
    ids = encode_prompt(lm, settings, prompt, settings.race_max_prompt_tokens)
    n = settings.live_race_new_tokens
    labels, pieces, steps = [lm.tokenizer.decode([i]) for i in ids], [], []
    yield LiveRaceFrame(first_screen.empty_picture(lm.info.layers, "Racing: the first step runs "
                                                   "with the cache, then without it…",
                                                   "live-race", RACE_TITLES),
                        "*Racing: the first step is running in both lanes…*")
    for step in race(lm, ids, n):
        steps.append(step)
        if step.lane != RECOMPUTE:
            pieces.append(lm.tokenizer.decode([step.token_id]))
            continue
        judged = noise.reading(race_repeats(steps), settings) if step.index == n - 1 else None
        yield LiveRaceFrame(first_screen.race_picture(labels, steps, lm.info.layers, output=pieces,
                                                      capacity=len(ids) + n),
                            first_screen.race_ratio_html(summarize(steps, len(ids)), judged))


def about_model_md(info) -> str:
    """'About this model' in plain words (the details card follows it)."""
    return (f"**LLM inference, step by step.** Every number in this app is measured live on the "
            f"machine serving this page ({info.device}), unless it is labelled theoretical (a "
            "formula) or recorded (on another machine, named). "
            f"The model is **{info.name}**: a small chat model with "
            f"{info.parameters / 1e6:.0f} million numbers (its weights) arranged in "
            f"{info.layers} layers. Big chat models work the same way, with many more of both. "
            "It runs on this machine, offline, with no service behind it.")
