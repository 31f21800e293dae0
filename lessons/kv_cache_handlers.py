"""Lesson 4 handlers: the KV cache seen growing, raced against recomputation, projected to
large models, reused across questions and read by attention."""
from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from plotly.graph_objects import Figure

from inference import compute_thread
from inference.config import Settings
from inference.errors import PromptTooLongError, SettingOutOfRangeError
from inference.experiments import kv_projection, kv_race, noise, quiet_reference
from inference.experiments.attention_view import (
    AttentionView,
    HeldAttention,
    newest_attention,
    watch_growth,
)
from inference.experiments.kv_race import LENGTHS, RECOMPUTE, REPEATS, LengthPoint, step_costs
from inference.experiments.noise import Noise
from inference.experiments.quality import load_perplexity_text
from inference.generation import stream
from inference.kv_cache import cache_tensor_bytes
from visualizations import kv_charts, kv_text
from visualizations.mechanism import race_diagram
from visualizations.noise_view import busy_notice_html, supports_verdict
from visualizations.style import empty_figure, info_caption

from .common.latest import keep, reuse
from .common.predictions import guess_md
from .common.prompt_input import encode_prompt, prompt_lines

GUESS_KEY = "kv_race"  # the presenter screen whose question the race answers
BYTES_PER_VALUE = (("fp32 (4 bytes)", 4), ("fp16/bf16 (2)", 2), ("int8/fp8 (1)", 1))
FORMULA = ("theoretical: bytes = 2 × layers × KV heads × head dim × bytes per value × tokens "
           "× batch")


class GrowthFrame(NamedTuple):
    grid: Figure  # the cache tensors, one column per token
    size: Figure  # cache bytes so far: tensors vs formula
    formula: str
    text: str


class RaceFrame(NamedTuple):
    plot: Figure | None  # None: a frame between the two lanes of a step (progress only)
    summary: str | None
    progress: str
    diagram: str | None = None  # the newest pair of steps animated, cache on and off
    noise: Noise | None = None  # the last frame: was the machine busy while racing


class ChartFrame(NamedTuple):  # the race at several lengths, or prefix reuse
    plot: Figure
    text: str
    progress: str | None = None


PROJECT_PROMPT, PROJECT_TOKENS = 32, 1000  # the theoretical long generation the text quotes


def race_lengths_frames(lm, shared=None) -> Iterator[ChartFrame]:
    """One step both ways at each of `LENGTHS`, a frame per length, then the theory beyond."""
    caption = info_caption(lm.info, note=f"median of {REPEATS} steps per length and lane")
    key = ("race-lengths", lm.info.device, lm.info.dtype)
    done = reuse(shared, key)
    note = ("✅ Measured on this machine just now." if done is None
            else "✅ Measured earlier on this machine and shared with every visitor.")
    if done is None:
        text_ids = lm.tokenizer(load_perplexity_text(), add_special_tokens=False)["input_ids"]
        points: list[LengthPoint] = []
        yield ChartFrame(kv_charts.race_lengths_figure([]), "",
                         f"⏳ Measuring one step at {LENGTHS[0]} tokens, both ways…")
        for point in step_costs(lm, text_ids):
            points.append(point)
            nxt = LENGTHS[len(points)] if len(points) < len(LENGTHS) else None
            yield ChartFrame(kv_charts.race_lengths_figure(points, caption=caption),
                             kv_text.race_lengths_markdown(points),
                             f"⏳ Measured {len(points)} of {len(LENGTHS)} lengths"
                             + (f"; now {nxt} tokens…" if nxt else "."))
        done = tuple(points), noise.reading()
        keep(shared, key, *done)
    points, judged = done
    ab = kv_race.fit(list(points))
    cached, plain = kv_race.generation_seconds(list(points), PROJECT_PROMPT, PROJECT_TOKENS)
    yield ChartFrame(kv_charts.race_lengths_figure(points, ab, caption),
                     kv_text.race_lengths_markdown(
                         points, (PROJECT_PROMPT, PROJECT_TOKENS, cached, plain), judged), note)


class ProjectionView(NamedTuple):
    by_context: Figure
    by_batch: Figure
    gqa: Figure
    table: str


class AttentionShown(NamedTuple):
    view: AttentionView | HeldAttention  # kept in the learner's gr.State for redrawing
    plot: Figure


def growth_frames(lm, settings: Settings, prompt: str, new_tokens: int) -> Iterator[GrowthFrame]:
    """Generate greedily, the real cache drawn and its bytes counted after every step."""
    ids = encode_prompt(lm, settings, prompt)
    settings.growth_new_tokens.check("New tokens", new_tokens)
    caption = info_caption(lm.info)
    history: list[tuple[int, int, int]] = []
    steps = []
    for step in watch_growth(lm, ids, int(new_tokens), settings.growth_new_tokens.high):
        snap = step.cache
        history.append((snap.tokens, snap.tensor_bytes, snap.formula_bytes))
        steps.append(step.seconds)
        judged = noise.reading(steps[1:], settings) if step.finished else None
        yield GrowthFrame(grid=kv_charts.cache_grid_figure(snap, step.prompt_tokens, caption),
                          size=kv_charts.cache_bytes_figure(history, caption),
                          formula=kv_text.formula_markdown(snap),
                          text=busy_notice_html(judged) + kv_text.growth_step_markdown(step))


def race_frames(lm, settings: Settings, prompt: str, new_tokens: int,
                guess: float | None = None) -> Iterator[RaceFrame]:
    """Cached lane against recomputation, a frame per pair of steps; `guess`: × faster."""
    ids = encode_prompt(lm, settings, prompt)
    limit = settings.race_max_prompt_tokens
    if len(ids) > limit:
        raise PromptTooLongError(f"The race prompt is {len(ids)} tokens; keep it under {limit} "
                                 "(the no-cache lane re-reads all of it every step).")
    settings.race_new_tokens.check("New tokens", new_tokens)
    n, steps = int(new_tokens), []
    prompt, pieces = [lm.tokenizer.decode([i]) for i in ids], []
    for step in kv_race.checked_race(lm, ids, n):  # raced again if its speed-up is impossible
        if step.attempt and step.index == 0 and step.lane != RECOMPUTE:
            steps, pieces = [], []
        steps.append(step)
        if step.lane != RECOMPUTE:
            pieces.append(lm.tokenizer.decode([step.token_id]))
            # a frame between the lanes: the server may step here
            yield RaceFrame(plot=None, summary=None,
                            progress=kv_text.race_progress_markdown(step.index, n, both=False))
        if step.lane == RECOMPUTE:
            summary, last = kv_race.summarize(steps, len(ids)), step.index == n - 1
            judged = noise.reading(race_repeats(steps), settings) if last else None
            quiet = quiet_reference.for_race(summary, lm.info.dtype, judged) if last else None
            compared = (guess_md(GUESS_KEY, guess, summary.speedup,
                                 noisy=not supports_verdict(judged), reference=quiet)
                        if last and not summary.impossible else "")
            caption = info_caption(lm.info, chats=compute_thread.chats_so_far())  # so far
            yield RaceFrame(plot=kv_charts.race_figure(steps, caption),
                            summary=kv_text.race_summary_markdown(summary, judged, quiet)
                            + compared,
                            progress=kv_text.race_progress_markdown(step.index, n),
                            diagram=race_diagram(prompt, steps, lm.info.layers, output=pieces,
                                                 capacity=len(ids) + n),
                            noise=judged)


def race_repeats(steps) -> list[float]:
    """The cached lane's decode steps (the same work repeated), for the noise rule."""
    return [s.seconds for s in steps if s.lane != RECOMPUTE and s.index > 0]


def projection_view(lm, settings: Settings, batch: int, context: int,
                    bytes_per_value: int) -> ProjectionView:
    """Cache memory against context and batch for this model and published ones (theoretical)."""
    settings.projection_batch.check("Batch size", batch)
    settings.projection_context.check("Context length", context)
    if bytes_per_value not in {v for _, v in BYTES_PER_VALUE}:
        raise SettingOutOfRangeError("Bytes per value must be 1, 2 or 4.")
    batch, context, bpv = int(batch), int(context), int(bytes_per_value)
    contexts, batches = settings.projection_context, settings.projection_batch
    mine = kv_projection.this_model(lm.info)
    specs = [mine, *kv_projection.PUBLISHED]
    by_context = kv_projection.project_context(
        specs, kv_projection.doubling_range(int(contexts.low), int(contexts.high)), batch, bpv)
    by_batch = kv_projection.project_batch(
        specs, kv_projection.doubling_range(int(batches.low), int(batches.high)), context, bpv)
    mha = kv_projection.as_mha(mine)
    gqa_rows = [(f"{mine.name}: {mine.kv_heads} KV heads (GQA)", mine.bytes_per_token(bpv)),
                (f"as MHA: {mha.kv_heads} KV heads", mha.bytes_per_token(bpv))]
    crossover = {s.name: kv_projection.crossover_tokens(s, bpv, batch) for s in specs}
    return ProjectionView(
        by_context=kv_charts.projection_figure(by_context, FORMULA, highlight=mine.name),
        by_batch=kv_charts.projection_figure(by_batch, FORMULA, highlight=mine.name),
        gqa=kv_charts.gqa_figure(gqa_rows, FORMULA),
        table=kv_text.projection_table_markdown(specs, crossover, mine, bpv, batch,
                                                lm.info.context_window))


def prefix_frames(lm, settings: Settings, system: str, questions: str,
                  new_tokens: int) -> Iterator[ChartFrame]:
    """Prefill the system prompt once, then answer each question both ways."""
    if len(system or "") > settings.max_prompt_chars:
        raise PromptTooLongError(
            f"The system prompt is over {settings.max_prompt_chars:,} characters.")
    settings.prefix_new_tokens.check("Answer tokens", new_tokens)
    ids = kv_race.shared_prefix_ids(lm.tokenizer, system)
    lines = prompt_lines(settings, questions)
    kv_race.prefix_request_tokens(lm.tokenizer, system, lines, int(new_tokens),
                                  settings.prefix_request_tokens)  # before any model run
    prefix = kv_race.prefill_prefix(lm, ids)
    caption, runs = info_caption(lm.info), []

    def frame(judged: Noise | None = None) -> ChartFrame:
        return ChartFrame(plot=kv_charts.prefix_figure(runs, caption),
                           text=busy_notice_html(judged)
                           + kv_text.prefix_markdown(len(ids), prefix.seconds,
                                                     cache_tensor_bytes(prefix.cache), runs))
    yield frame()
    for run in kv_race.prefix_runs(lm, prefix, system, lines, int(new_tokens)):
        runs.append(run)
        yield frame(noise.reading(settings=settings) if len(runs) == len(lines) else None)


def attention_run(lm, settings: Settings, prompt: str, new_tokens: int) -> AttentionView:
    """Generate a few greedy tokens, then read the newest token's attention in every layer."""
    ids = encode_prompt(lm, settings, prompt)
    settings.attention_new_tokens.check("New tokens first", new_tokens)
    generated = [ev.token_id for ev in stream(lm, ids, max_new_tokens=int(new_tokens))]
    return newest_attention(lm, ids + generated)


FREED = ("This attention view was freed to make room for other visitors (the server keeps a "
         "budget for what every visitor holds): press Show attention again.")


def attention_redraw(lm, view: AttentionView | HeldAttention | None, layer: int,
                     head: int) -> Figure:
    """One layer's and query head's weights (clamped); empty before a run or once freed."""
    if isinstance(view, HeldAttention):
        if view.view is None:
            return empty_figure(FREED)
        view = view.view
    if view is None:
        return empty_figure("Press “Show attention of the newest token”: its weights over "
                            "every cached position appear here.")
    layer = min(max(int(layer), 0), view.layers - 1)
    head = min(max(int(head), 0), view.query_heads - 1)
    return kv_charts.attention_figure(view, layer, head, info_caption(lm.info))


def show_attention(lm, settings: Settings, prompt: str, new_tokens: int, layer: int,
                   head: int, budget=None) -> AttentionShown:
    """Run the attention view and draw it; `budget` (`CacheBudget`) holds it like a cache."""
    view = attention_run(lm, settings, prompt, new_tokens)
    plot = attention_redraw(lm, view, layer, head)
    if budget is not None:
        view = HeldAttention(view)
        budget.touch(view)
    return AttentionShown(view=view, plot=plot)
