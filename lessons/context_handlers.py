"""Lesson 4c handlers: what a long prompt and a long cache cost, measured up to the length the
learner picks (at most the window); a finished quiet sweep is shared with every visitor."""
from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from plotly.graph_objects import Figure

from inference import compute_thread
from inference.config import Settings
from inference.errors import SettingOutOfRangeError
from inference.experiments import context_sweep, context_theory, noise
from inference.experiments.context_sweep import compare_attention_memory
from visualizations import kv_charts as charts
from visualizations import kv_text
from visualizations.style import info_caption

from .common.latest import keep, reuse, shared_key
from .common.predictions import guess_md

GUESS_KEY = "long_context"  # the presenter screen whose question the decode sweep answers
SHARED_NOTE = "✅ Measured earlier on this machine and shared with every visitor."
FRESH_NOTE = "✅ Measured on this machine just now."


class ContextFrame(NamedTuple):
    chart: Figure
    text: str  # the table and its verdicts (markdown)
    progress: str  # "step k of N" while it runs, then where the figures came from
    cuts: str | None = None  # "what cuts the cost" with the sweep's bytes (last decode frame)


def length_choices(lm, settings: Settings) -> tuple[int, ...]:
    """The longest lengths a learner may pick: the prefill lengths up to the window."""
    return context_sweep.prefill_lengths(settings, lm.info.context_window)


def default_length(lm, settings: Settings) -> int:
    """The longest choice not above `Settings.context_default_max_tokens`."""
    choices = length_choices(lm, settings)
    return max([n for n in choices if n <= settings.context_default_max_tokens] or choices[:1])


def _longest(lm, max_tokens) -> int:
    """The learner's longest length, refused beyond the window (or below one token)."""
    try:
        most = int(max_tokens)
    except (TypeError, ValueError) as exc:
        raise SettingOutOfRangeError("Choose a longest length from the list.") from exc
    if most < 1:
        raise SettingOutOfRangeError(f"The longest length must be 1 token or more (got {most}).")
    context_sweep.check_fits_window(most, lm.info.context_window, "A longest length")
    return most


def sweep_prefill_lengths(lm, settings: Settings, max_tokens) -> tuple[int, ...]:
    """The prompt lengths the prefill sweep times: the Settings' ones up to the longest."""
    most = _longest(lm, max_tokens)
    return tuple(sorted({n for n in length_choices(lm, settings) if n < most} | {most}))


def sweep_decode_lengths(lm, settings: Settings, max_tokens) -> tuple[int, ...]:
    """The cache lengths the decode sweep times, up to the longest (at most window - 1)."""
    most, window = _longest(lm, max_tokens), lm.info.context_window
    return tuple(sorted({n for n in context_sweep.decode_lengths(settings, window) if n < most}
                        | {min(most, window - 1)}))


def _prefill_view(lm, points, caption: str, judged: noise.Noise | None = None
                  ) -> tuple[Figure, str]:
    info = lm.info
    curve = shares = None
    if len(points) >= 3:  # a + b·L + c·L² needs three lengths to pin down
        lengths = [p.tokens for p in points]
        curve = context_theory.fit_quadratic(lengths, [p.seconds for p in points])
        matmul = context_theory.matmul_parameters(info.parameters, info.vocab_size,
                                                 info.hidden_size)
        shares = context_theory.length_shares(curve, lengths, matmul, info.layers, info.heads,
                                             info.head_dim)
    return (charts.prefill_lengths_figure(points, curve, shares or (), caption),
            kv_text.prefill_markdown(points, curve, shares or (), judged))


def prefill_frames(lm, settings: Settings, shared, max_tokens) -> Iterator[ContextFrame]:
    """One prefill at each prompt length up to `max_tokens`; a frame after each, then the fit."""
    lengths = sweep_prefill_lengths(lm, settings, max_tokens)
    caption = info_caption(lm.info, note=f"best of {settings.context_prefill_repeats} per length")
    key = shared_key(lm, "context-prefill") + (lengths, settings.context_prefill_repeats)
    done = reuse(shared, key)
    note = FRESH_NOTE if done is None else SHARED_NOTE
    if done is None:
        yield ContextFrame(charts.prefill_lengths_figure([], caption=caption), "",
                           f"⏳ Step 1 of {len(lengths)}: one prefill of {lengths[0]:,} tokens…")
        points = ()
        for progress in context_sweep.prefill_lengths_sweep(lm, lengths,
                                                            settings.context_prefill_repeats):
            points, last = progress.points, progress.points[-1]
            caption = info_caption(lm.info, note=f"best of {settings.context_prefill_repeats} "
                                   "per length", chats=compute_thread.chats_so_far())
            chart, text = _prefill_view(lm, points, caption)
            nxt = (f" Now step {progress.done + 1} of {progress.total}: "
                   f"{progress.next_tokens:,} tokens…" if progress.next_tokens else "")
            yield ContextFrame(chart, text, f"⏳ Step {progress.done} of {progress.total}: "
                               f"{last.tokens:,} tokens prefilled in {last.seconds:,.2f} s "
                               f"({last.seconds_per_token * 1000:,.2f} ms per token).{nxt}")
        done = points, noise.reading(settings=settings)
        keep(shared, key, *done)
    points, judged = done
    chart, text = _prefill_view(lm, points, caption, judged)
    yield ContextFrame(chart, text, note)


def cuts_text(lm, settings: Settings, decode_points=()) -> str:
    """'What cuts the cost' at the window, the GQA row from the decode sweep's tensors once run."""
    info = lm.info
    measured = context_theory.measured_bytes_per_token(decode_points)
    return kv_text.cuts_markdown(context_theory.cost_cuts(
        info.layers, info.heads, info.kv_heads, info.head_dim, lm.bytes_per_value,
        info.context_window, settings.context_sliding_window, measured_bytes_per_token=measured))


def _guess_text(lm, settings: Settings, points, theory, guess: float | None,
                judged: noise.Noise | None = None) -> str:
    """The answer to the guess box at its lengths, or why this run cannot answer it."""
    short, long = settings.context_guess_lengths
    comparison = context_sweep.compare_lengths(points, short, long)
    answer = (("\n\n---\n" + kv_text.guess_verdict_markdown(comparison, theory, judged))
              if comparison else "")
    reached = max((p.cache_tokens for p in points), default=0)
    if comparison is None or comparison.long.cache_tokens < long:
        return (answer + f"\n\n---\n*Your guess was about {long:,} cached tokens; this run "
                f"stopped at {reached:,}. Choose {lm.info.context_window:,} as the longest "
                "length to answer it (one long prefill fills that cache first).*")
    return answer + guess_md(GUESS_KEY, guess, comparison.ratio,
                             noisy=judged is not None and judged.busy)


def decode_frames(lm, settings: Settings, shared, max_tokens, guess: float | None = None
                  ) -> Iterator[ContextFrame]:
    """One decode step per cache length and batch; `guess`: × slower long than short."""
    lengths = sweep_decode_lengths(lm, settings, max_tokens)
    batches, repeats = settings.context_decode_batches, settings.context_decode_repeats
    window = lm.info.context_window
    caption = info_caption(lm.info, note=f"median of {repeats} steps per point")
    key = shared_key(lm, "context-decode") + (lengths, batches, repeats)
    theory = context_theory.decode_theory(lm, shared)  # the bandwidth, measured once
    done = reuse(shared, key)
    note = FRESH_NOTE if done is None else SHARED_NOTE
    if done is None:
        yield ContextFrame(charts.decode_lengths_figure([], caption=caption), "",
                           f"⏳ Filling a cache of {lengths[-1]:,} tokens with one prefill "
                           f"(untimed), then {len(lengths) * len(batches)} timed steps…")
        points = ()
        for progress in context_sweep.decode_lengths_sweep(lm, lengths, batches, repeats):
            points, last = progress.points, progress.points[-1]
            caption = info_caption(lm.info, note=f"median of {repeats} steps per point",
                                   chats=compute_thread.chats_so_far())
            yield ContextFrame(charts.decode_lengths_figure(points, theory, window, caption),
                               kv_text.decode_markdown(points, theory, window),
                               f"⏳ Step {progress.done} of {progress.total}: batch "
                               f"{last.batch}, {last.cache_tokens:,} cached tokens: one step "
                               f"{last.seconds * 1000:,.1f} ms.")
        done = points, noise.reading(settings=settings)
        keep(shared, key, *done)
    points, judged = done
    yield ContextFrame(charts.decode_lengths_figure(points, theory, window, caption),
                       kv_text.decode_markdown(points, theory, window, judged)
                       + _guess_text(lm, settings, points, theory, guess, judged), note,
                       cuts_text(lm, settings, points))


def memory_frames(lm, settings: Settings, shared, max_tokens) -> Iterator[ContextFrame]:
    """Peak memory of one prefill, tiled ("sdpa") then "eager", at the longest length (capped)."""
    tokens = min(_longest(lm, max_tokens), settings.context_eager_max_tokens)
    key = shared_key(lm, "context-memory") + (tokens,)
    caption = info_caption(lm.info)
    done = reuse(shared, key)
    note = FRESH_NOTE if done is None else SHARED_NOTE
    if done is None:
        yield ContextFrame(charts.attention_memory_figure([], caption),
                           kv_text.memory_markdown([]),
                           f"⏳ Step 1 of 2: one prefill of {tokens:,} tokens with sdpa…")
        peaks = []
        for peak in compare_attention_memory(lm, tokens, settings.context_eager_max_tokens):
            peaks.append(peak)
            nxt = " Now step 2 of 2: the same with eager attention…" if len(peaks) == 1 else ""
            yield ContextFrame(charts.attention_memory_figure(peaks, caption),
                               kv_text.memory_markdown(peaks),
                               f"⏳ Step {len(peaks)} of 2: {peak.implementation}, peak "
                               f"{peak.peak_bytes / 1e6:,.0f} MB above the start.{nxt}")
        done = tuple(peaks), noise.reading(settings=settings)
        keep(shared, key, *done)
    peaks, judged = done
    yield ContextFrame(charts.attention_memory_figure(peaks, caption),
                       kv_text.memory_markdown(peaks, judged), note)
