"""Lesson 3 handlers: what Step, a Play tick, Stop and Branch do to a learner's `Generation`
(each function's docstring says its rule), and what the panel shows for it (`views`)."""
from __future__ import annotations

import contextlib
from typing import NamedTuple

import plotly.graph_objects as go

from inference import generation
from inference.config import Settings
from inference.errors import NotReadyError, SettingOutOfRangeError
from inference.experiments import noise
from inference.experiments.noise import Noise
from inference.generation import Generation
from inference.sampling import SamplingSettings
from visualizations.mechanism import decode_diagram
from visualizations.noise_view import busy_notice_html
from visualizations.style import info_caption
from visualizations.timing_charts import candidates_figure, decode_latency_figure
from visualizations.token_view import decode_stats_md, output_html, timed_step

from .common.prompt_input import encode_prompt


class DecodeView(NamedTuple):  # everything the panel shows for one state of the generation
    gen: Generation | None
    text_html: str  # the answer so far, one numbered tile per token
    stats_md: str  # TTFT, TPOT, tokens/s, cache size, under the busy notice
    candidates: go.Figure  # the looked-at step's candidates (and reshaped by sampling)
    timing: go.Figure  # per-token latency
    tokens: int  # tokens on screen (sent back with Stop)
    look_at: int  # the step whose candidates are drawn
    choices: list[tuple[str, int]]  # that step's candidates, for Branch: (label, token id)
    pick: int | None  # the pre-selected candidate: the likeliest one not taken
    diagram: str = ""  # the newest step animated: tokens through the layers, the KV cache
    noise: Noise | None = None  # the noise rule's reading of the decode steps so far


def views(lm, gen: Generation | None, sampling: SamplingSettings,
          at_step: int | None = None) -> DecodeView:
    """The view looking at step `at_step` (default: the newest, the only one whose reshaped
    probabilities are drawn); under the generation's lock, so a Stop's view is the newer."""
    with gen.lock if gen is not None else contextlib.nullcontext():
        caption = info_caption(lm.info)
        events = gen.events if gen else []
        newest = len(events) - 1
        at = newest if at_step is None else max(0, min(int(at_step), newest))
        ev = events[at] if events else None
        shaped = generation.reshaped(gen, sampling) if gen is not None and at == newest else None
        choices = [(f"{c.piece!r}  ({c.raw_probability:.1%})", c.token_id)
                   for c in ev.candidates] if ev else []
        pick = next((c.token_id for c in ev.candidates if c.token_id != ev.token_id),
                    None) if ev else None
        steps = [e.seconds for e in events[1:] if timed_step(e)]  # repeats of one kind of step
        judged = noise.reading(steps) if steps else None
        return DecodeView(
            gen=gen, text_html=output_html(events), noise=judged,
            stats_md=busy_notice_html(judged)
            + decode_stats_md(events, gen.finished if gen else None),
            candidates=candidates_figure(ev.candidates if ev else [], ev.token_id if ev else None,
                                         shaped, caption, step=at if ev else None),
            timing=decode_latency_figure([e.seconds for e in events], caption,
                                         forced=[e.index for e in events if not timed_step(e)]),
            tokens=len(events), look_at=max(at, 0), choices=choices, pick=pick,
            diagram=decode_diagram(
                [lm.tokenizer.decode([i]) for i in gen.prompt_ids] if gen else [], events,
                lm.info.layers,
                capacity=len(gen.prompt_ids) + gen.max_new_tokens if gen else None))


def stop(gen: Generation | None, tokens_shown: float | None) -> None:
    """Stop for good, keeping exactly the tokens on screen (one computed but not yet shown is
    dropped); waits for a step in flight, so its view is drawn before Stop's."""
    if gen is None:
        return
    shown = tokens_shown if isinstance(tokens_shown, (int, float)) else None
    with gen.lock:
        gen.stop(keep=int(shown) if shown is not None and 0 <= shown < len(gen.events) else None)


def step(lm, settings: Settings, gen: Generation | None, prompt: str, max_new: int,
         sampling: SamplingSettings) -> Generation:
    """One Step: start a generation if there is none (or the prompt changed), then one token."""
    ids = encode_prompt(lm, settings, prompt)
    if gen is None or gen.prompt_ids != ids or gen.finished:
        gen = generation.start(lm, ids, sampling, int(max_new), top_k_shown=settings.top_k_shown,
                               max_new_limit=settings.new_tokens.high)
    with gen.lock:  # two Steps sent at once take turns, never interleave
        gen.set_max_new_tokens(int(max_new), settings.new_tokens.high)
        if gen.sampling != sampling:
            generation.set_sampling(lm, gen, sampling)
        generation.next_token(lm, gen)  # the learner's pick first, after a Branch
    return gen


def play_tick(lm, settings: Settings, gen: Generation | None, prompt: str, max_new: int,
              sampling: SamplingSettings) -> tuple[Generation | None, bool]:
    """One tick of Play: a Step, then whether Play stops (a tick queued after Stop does nothing)."""
    if gen is not None and gen.stopped:
        return gen, True
    before = len(gen.events) if gen is not None else 0
    gen = step(lm, settings, gen, prompt, max_new, sampling)
    if gen.stopped:  # Stop was pressed while this step ran: the step does not count
        gen.truncate(before)
        return gen, True
    return gen, gen.finished is not None


def branch_to(lm, gen: Generation | None, at_step: int, token_id: int | None) -> Generation:
    """Rewind to `at_step` and take that step with `token_id`, refused unless one of that very
    step's candidates (a list not yet redrawn for the step typed would splice in a stranger)."""
    if gen is None or not gen.events:
        raise NotReadyError("Generate a few tokens first, then branch from one of them.")
    if token_id is None:
        raise NotReadyError("Choose a candidate token to branch with.")
    step_no = int(at_step)
    with gen.lock:
        if not 0 <= step_no < len(gen.events):
            raise SettingOutOfRangeError(
                f"There is no step {step_no} to branch from (steps 0 to {len(gen.events) - 1}).")
        if int(token_id) not in {c.token_id for c in gen.events[step_no].candidates}:
            raise SettingOutOfRangeError(
                f"That candidate was not one of step {step_no}'s: the list was for another "
                "step. Pick a candidate again from the list now shown, then press Branch.")
        gen.branch(step_no, int(token_id))
        generation.next_token(lm, gen)
    return gen
