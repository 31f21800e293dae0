"""Lesson 2 handlers: one prompt's parallel pass measured, and prefill swept against one token at
a time over prompt lengths; an impossible speed-up is not drawn, a quiet one is kept."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import NamedTuple

import plotly.graph_objects as go

from inference import compute_thread
from inference.config import Settings
from inference.experiments import noise, prefill_sweep, quiet_reference
from visualizations.style import info_caption
from visualizations.timing_charts import prefill_sweep_figure
from visualizations.timing_text import sweep_progress_md, sweep_verdict_md, verdict_point

from .common.latest import keep, reuse
from .common.predictions import guess_md
from .common.prompt_input import encode_prompt

LENGTH_CHOICES = [1, 8, 32, 128, 512, 1024]
DEFAULT_LENGTHS = [1, 8, 32, 128, 512]
GUESS_KEY = "prefill_race"  # the presenter screen whose question the sweep answers
SHARED_NOTE = "*Measured earlier on this machine (shared result): the same verdict as its run.*"
PROMPT = "Summarise the plot of Romeo and Juliet in three sentences."  # the lesson's first


class PrefillSweepFrame(NamedTuple):
    chart: go.Figure
    progress: str


def measure_text(lm, settings: Settings, prompt: str) -> prefill_sweep.PrefillMeasurement:
    """Prefill the chat-templated prompt, then a few decode steps (`.noise`: their reading)."""
    ids = encode_prompt(lm, settings, prompt)
    m = prefill_sweep.measure_prompt(lm, ids)
    judged = noise.reading([e.seconds for e in m.events[1:]], settings)
    return replace(m, noise=judged)


def run_prefill_sweep(lm, settings: Settings, shared, lengths: list[int], max_sequential: int,
              guess: float | None = None) -> Iterator[PrefillSweepFrame]:
    """A frame per measured length; the last sets the `guess` (× faster) beside the speed-up."""
    settings.prefill_sweep_tokens.check("Measure one-at-a-time up to", max_sequential)
    caption = info_caption(lm.info)
    lengths = sorted({int(n) for n in lengths}) or [8, 32, 128]
    key = ("prefill_sweep", tuple(lengths), int(max_sequential))
    done = reuse(shared, key)
    if done is not None:
        points, judged = done
        yield PrefillSweepFrame(prefill_sweep_figure(drawn(points), caption),
                         sweep_verdict_md(points, judged) + _compared(points, guess, judged)
                         + "\n\n" + SHARED_NOTE)
        return
    yield PrefillSweepFrame(prefill_sweep_figure([], caption), "Warming up…")
    points: tuple[prefill_sweep.PrefillPoint, ...] = ()
    for progress in prefill_sweep.prefill_sweep(lm, lengths, int(max_sequential)):
        points = progress.points
        caption = info_caption(lm.info, chats=compute_thread.chats_so_far())  # so far
        n = lengths[progress.done] if progress.feeding else 0  # fed one token at a time
        yield PrefillSweepFrame(prefill_sweep_figure(drawn(points), caption),
                                f"⏳ {n} tokens: fed {progress.feeding} of {n} one at a time…"
                                if progress.feeding
                                else sweep_progress_md(progress.done, progress.total, points[-1]))
    judged = noise.reading(settings=settings)
    if not any(p.impossible for p in points):  # an impossible figure is not passed on
        keep(shared, key, points, judged)
    reference = sweep_reference(points, lm.info.dtype, judged)
    yield PrefillSweepFrame(prefill_sweep_figure(drawn(points), caption),
                     sweep_verdict_md(points, judged, reference)
                     + _compared(points, guess, judged, reference))


def drawn(points) -> list[prefill_sweep.PrefillPoint]:
    """The points a chart may draw: none whose speed-up is impossible (its reason is said)."""
    return [p for p in points if not p.impossible]


def sweep_reference(points, dtype: str, judged: noise.Noise | None):
    """This machine's quiet reference for the verdict point, kept from a quiet, possible run."""
    if not points:
        return None
    last, ratio = verdict_point(points)
    if last.robust is None:
        return None
    # what the verdict measured, and how: only like is shown beside like
    how = ("both ways" if last.sequential_measured
           else f"one at a time from {prefill_sweep.PER_TOKEN_FROM}")
    return quiet_reference.keep_if_quiet(f"prefill_sweep {last.tokens} tokens {how} {dtype}",
                                         ratio, last.robust.label(),
                                         None if last.impossible else judged)


def _compared(points, guess: float | None, judged: noise.Noise | None,
              reference=None) -> str:
    if not points or verdict_point(points)[0].impossible:
        return ""
    return guess_md(GUESS_KEY, guess, verdict_point(points)[1],
                    noisy=judged is not None and judged.busy, reference=reference)
