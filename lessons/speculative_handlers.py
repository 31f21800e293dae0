"""Lesson 3b handlers: speculative decoding raced against plain decoding, k swept, verification
timed with batching, the sampled rule counted; finished quiet results are shared."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import NamedTuple

import plotly.graph_objects as go

from inference.config import LIMITS, Settings
from inference.errors import SettingOutOfRangeError
from inference.experiments import noise, spec_expectation, speculative_race
from inference.speculative import SpecPass, check_request, make_draft
from visualizations import speculative_charts as charts
from visualizations.noise_view import busy_notice_html
from visualizations.speculative_charts import EMPTY_PASSES, EMPTY_RACE, passes_html, race_md
from visualizations.style import info_caption

from .common.latest import keep, reuse, shared_key
from .common.predictions import guess_md
from .common.prompt_input import encode_prompt

GUESS_KEY = "speculative"  # the presenter screen whose question the race answers
PROMPT = speculative_race.spec_prompt()  # the edit workload: the answer repeats most of its input
DRAFTS = [("prompt lookup (no second model)", "prompt_lookup"),
          (f"draft model ({LIMITS.spec_draft}, built from this model)", LIMITS.spec_draft)]
SHARED_NOTE = ("*Measured earlier on this machine with the same prompt and settings (shared "
               "result): its own figures and verdict.*")
SWEEP_BESIDE = ("\n\n*A quiet sweep's points are drawn beside the formula below, for your last "
                "race's draft.*")
BUILD_NOTE = ("Building the {draft} draft model from this model's weights: the first time this "
              "takes a while (it is kept for everyone after that)…")


class SpecRaceFrame(NamedTuple):
    passes_html: str
    cards_md: str
    progress: str
    summary: speculative_race.SpecRaceSummary | None = None  # at the end
    passes: tuple = ()  # the SpecPass records so far


class ChartFrame(NamedTuple):  # the k sweep, the batch measurement or the formula's view
    chart: go.Figure
    text: str
    progress: str | None = None  # None: the formula's view, drawn with no run


def check_draft(key: str) -> str:
    """The draft's key, or a sentence naming the choices."""
    keys = [k for _, k in DRAFTS]
    if key not in keys:
        raise SettingOutOfRangeError(f"Unknown draft {key!r}: choose one of {', '.join(keys)}.")
    return key


def _prepare(lm, settings: Settings, prompt: str, k, new_tokens) -> tuple[list[int], int, int]:
    """The encoded prompt, k and new tokens, checked before any model work."""
    ids = encode_prompt(lm, settings, prompt)
    for name, value in (("Draft length k", k), ("New tokens", new_tokens)):
        if value is None or value != int(value):
            raise SettingOutOfRangeError(f"{name} must be a whole number (got {value!r}).")
    check_request(lm, ids, int(k), int(new_tokens))
    return ids, int(k), int(new_tokens)


def run_spec_race(lm, settings: Settings, shared, prompt: str, draft: str, k, new_tokens,
             guess: float | None = None) -> Iterator[SpecRaceFrame]:
    """A frame per verification pass, then the cards and the guess (a count: judged if busy)."""
    ids, k, new_tokens = _prepare(lm, settings, prompt, k, new_tokens)
    key = shared_key(lm, "spec_race") + (tuple(ids), check_draft(draft), k, new_tokens)
    done = reuse(shared, key)
    if done is not None:
        (passes, summary), judged = done
        yield SpecRaceFrame(passes_html(passes), race_md(summary, judged)
                            + guess_md(GUESS_KEY, guess, summary.tokens_per_pass) + "\n\n"
                            + SHARED_NOTE, "Done (shared result).", summary, passes)
        return
    if draft != "prompt_lookup":
        yield SpecRaceFrame(EMPTY_PASSES, EMPTY_RACE, BUILD_NOTE.format(draft=draft))
    d = make_draft(lm, draft, shared)
    yield SpecRaceFrame(EMPTY_PASSES, EMPTY_RACE, "Warming up both lanes (untimed), then racing…")
    for u in speculative_race.race_updates(lm, ids, d, k, new_tokens, shared):
        if u.summary is None:
            yield SpecRaceFrame(passes_html(u.passes), EMPTY_RACE, f"{u.message} · plain lane: "
                                f"{u.plain_tokens} tokens", None, u.passes)
            continue
        judged = noise.reading(u.summary.plain_step_seconds, settings)
        summary = replace(u.summary, reading=judged)  # later views judge it the same
        keep(shared, key, (u.passes, summary), judged)
        yield SpecRaceFrame(passes_html(u.passes), race_md(summary, judged)
                            + guess_md(GUESS_KEY, guess, summary.tokens_per_pass), u.message,
                            summary, u.passes)


def k_range(settings: Settings) -> tuple[int, ...]:
    return tuple(range(settings.spec_k.low, settings.spec_k.high + 1))


def _sweep_key(lm, settings: Settings, ids: list[int], new_tokens: int) -> tuple:
    return shared_key(lm, "spec_sweep") + (tuple(ids), k_range(settings), new_tokens)


def run_k_sweep(lm, settings: Settings, shared, prompt: str, new_tokens) -> Iterator[ChartFrame]:
    """Race both drafts at every k on one prompt, a frame after each race."""
    ids, _, new_tokens = _prepare(lm, settings, prompt, LIMITS.spec_k.low, new_tokens)
    caption = info_caption(lm.info)
    key = _sweep_key(lm, settings, ids, new_tokens)
    done = reuse(shared, key)
    if done is not None:
        points, judged = done
        yield ChartFrame(charts.k_sweep_figure(points, caption, judged), SHARED_NOTE + SWEEP_BESIDE,
                         "Done (shared result).")
        return
    yield ChartFrame(charts.k_sweep_figure((), caption), "",
                     BUILD_NOTE.format(draft=LIMITS.spec_draft))
    drafts = [make_draft(lm, k, shared) for _, k in DRAFTS]
    for u in speculative_race.sweep_k(lm, ids, drafts, k_range(settings), new_tokens, shared):
        if not u.finished:
            yield ChartFrame(charts.k_sweep_figure(u.points, caption), "", u.message)
            continue
        judged = noise.reading(settings=settings)
        keep(shared, key, u.points, judged)
        yield ChartFrame(charts.k_sweep_figure(u.points, caption, judged),
                         busy_notice_html(judged) + SWEEP_BESIDE, u.message)


def run_batch(lm, settings: Settings, shared, prompt: str, k,
              tokens_per_pass: float | None = None) -> Iterator[ChartFrame]:
    """A plain step and a verification pass timed at each batch (`tokens_per_pass`: last race's)."""
    ids, k, _ = _prepare(lm, settings, prompt, k, LIMITS.spec_new_tokens.low)
    caption = info_caption(lm.info)
    key = shared_key(lm, "spec_batch") + (tuple(ids), k, tuple(settings.spec_batches))
    done = reuse(shared, key)
    if done is not None:
        costs, judged = done
        yield ChartFrame(charts.batch_figure(costs, caption),
                         charts.batch_md(costs, tokens_per_pass, judged) + "\n\n" + SHARED_NOTE,
                         "Done (shared result).")
        return
    for u in spec_expectation.batch_interplay(lm, ids, k, settings.spec_batches, shared=shared):
        if not u.finished:
            yield ChartFrame(charts.batch_figure(u.points, caption), "", u.message)
            continue
        judged = noise.reading(settings=settings)
        keep(shared, key, u.points, judged)
        yield ChartFrame(charts.batch_figure(u.points, caption),
                         charts.batch_md(u.points, tokens_per_pass, judged), u.message)


def expectation_view(lm, settings: Settings, shared, prompt: str, new_tokens,
                     summary: speculative_race.SpecRaceSummary | None) -> ChartFrame:
    """The formula at every k from the last race (no model run), beside a shared quiet k sweep."""
    e = spec_expectation.expectation(summary, k_range(settings))
    sweep = ()
    if e is not None:
        ids, _, n = _prepare(lm, settings, prompt, LIMITS.spec_k.low, new_tokens)
        done = reuse(shared, _sweep_key(lm, settings, ids, n))
        sweep = done[0] if done is not None else ()
    caption = info_caption(lm.info, alone=False)
    return ChartFrame(charts.expectation_figure(e, sweep, caption), charts.expectation_md(e, sweep))


class SampledFrame(NamedTuple):
    passes_html: str
    text: str  # the count, at the end (before: what to press)
    progress: str
    run: spec_expectation.SampledRun | None = None


def run_sampled(lm, settings: Settings, shared, prompt: str, draft: str, k, new_tokens,
                temperature: float, summary: speculative_race.SpecRaceSummary | None = None
                ) -> Iterator[SampledFrame]:
    """One seeded run at `temperature` with the sampled acceptance rule, then guesses kept ÷
    judged and E, beside the last greedy race's α with that draft (a count: no noise reading)."""
    ids, k, new_tokens = _prepare(lm, settings, prompt, k, new_tokens)
    settings.temperature.check("Temperature", temperature)
    if check_draft(draft) != "prompt_lookup":
        yield SampledFrame(EMPTY_PASSES, charts.EMPTY_SAMPLED, BUILD_NOTE.format(draft=draft))
    d = make_draft(lm, draft, shared)
    fit = (spec_expectation.fit_race(summary)
           if summary is not None and summary.draft == draft else None)
    passes: list[SpecPass] = []
    for r in spec_expectation.sampled_run(lm, ids, d, k, float(temperature), new_tokens,
                                          seed=settings.seed.default):
        if isinstance(r, SpecPass):
            passes.append(r)
            yield SampledFrame(passes_html(passes), charts.EMPTY_SAMPLED,
                               f"Pass {r.index}: {r.tokens_so_far} tokens")
        else:
            yield SampledFrame(passes_html(passes),
                               charts.sampled_md(r, fit.alpha if fit else None),
                               f"Done: {r.passes} passes.", r)
