"""Lesson 5 handlers: the batch sweep, padding, static vs continuous scheduling and the cost
of a token; a finished quiet sweep or schedule is shared with the next visitor."""
from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from typing import NamedTuple

from plotly.graph_objects import Figure

from inference import compute_thread
from inference.config import LIMITS, Settings
from inference.experiments import batch_sweep, noise, quiet_reference, schedulers
from inference.experiments import serving_cost as dollars
from inference.experiments.batch_sweep import SweepUpdate
from inference.experiments.roofline import machine_bandwidth
from inference.kv_cache import bytes_per_token
from inference.paged_batch import padding_waste
from visualizations import batching_charts as charts
from visualizations import batching_text as text
from visualizations.mechanism import batch_diagram
from visualizations.noise_view import busy_notice_html, supports_verdict
from visualizations.style import info_caption

from .common.latest import keep, reuse, shared_key
from .common.predictions import guess_md
from .common.prompt_input import encode_prompt, prompt_lines

GUESS_KEY = "batch"  # the presenter screen whose question the sweep answers
COST_GUESS_KEY = "cost"  # ... and the one the cost view answers
SWEEP_PROMPT = LIMITS.default_prompt
RANDOM = "Random (seeded)"


class ScheduleComparison(NamedTuple):
    """Both schedulers on one trace: kept in the learner's state and shared with everyone."""

    static: schedulers.ScheduleResult
    continuous: schedulers.ScheduleResult
    trace: str  # the workload's name, with its seed, size and rate when random
    max_batch: int
    when: str  # wall-clock HH:MM of the measurement


class SweepFrame(NamedTuple):
    progress: str
    throughput: Figure | None = None
    step_time: Figure | None = None
    tradeoff: Figure | None = None
    table: str | None = None
    sweep: SweepUpdate | None = None  # set once the sweep has finished
    closing: str | None = None
    diagram: str | None = None  # the newest batch size's step beside batch 1, on the mechanism
    plan: str | None = None  # the memory plan of every batch size asked for (markdown)
    cards: str | None = None  # the headline cards under Run sweep


class PaddingView(NamedTuple):
    plot: Figure
    text: str


class ScheduleFrame(NamedTuple):
    progress: str
    static: Figure | None = None
    continuous: Figure | None = None
    summary: Figure | None = None
    table: str | None = None
    schedules: ScheduleComparison | None = None
    closing: str | None = None


class CostView(NamedTuple):
    plot: Figure
    table: str
    chain: str = ""  # from KV memory to dollars: this machine, published models, the levers


def budget_bytes(lm, settings: Settings, budget_mb: float | None) -> int:
    """The learner's memory budget in bytes; empty or 0 means half of the free memory."""
    if budget_mb is None or budget_mb <= 0:
        return batch_sweep.memory_budget_bytes(lm.device, 0.5)
    settings.memory_budget_mb.check("Memory budget (MB)", budget_mb)
    return int(budget_mb * 1e6)


def sweep_frames(lm, settings: Settings, shared, *, max_batch: int, steps: int,
                 budget_mb: float | None, schedules: ScheduleComparison | None = None,
                 guess: float | None = None) -> Iterator[SweepFrame]:
    """Decode batches of 1, 2, 4, ... `max_batch`; `guess`: × batch 1's tokens/s."""
    settings.batch.check("Largest batch", max_batch)
    settings.sweep_decode_steps.check("Timed decode steps", steps)
    max_batch, steps = int(max_batch), int(steps)
    prompt = encode_prompt(lm, settings, SWEEP_PROMPT)
    budget, sizes = budget_bytes(lm, settings, budget_mb), batch_sweep.sweep_sizes(max_batch)
    cap = batch_sweep.largest_fitting_batch(lm, sizes, len(prompt), steps + 1, budget)
    key = shared_key(lm, "batch-sweep") + (tuple(s for s in sizes if s <= cap), steps)
    kept = reuse(shared, key)  # a quiet earlier run with these settings
    if kept is not None:
        (update, when), judged = kept
        yield _sweep_frame(lm, update, text.shared_sweep_message(when, update.message),
                           schedules, guess, judged)
        return
    last = None
    for update in batch_sweep.run_sweep(lm, prompt, max_batch, steps, budget,
                                        bandwidth_gbs=machine_bandwidth(shared, lm.device)):
        grew = last is None or len(update.points) != len(last.points) or update.finished
        last = update
        judged = None
        if update.finished:  # judged by the noisiest batch size's timed steps (one step repeated)
            worst = max(update.points, key=lambda p: noise.repeat_spread(p.step_times) or 0.0,
                        default=None)
            judged = noise.reading(list(worst.step_times) if worst else [], settings)
            keep(shared, key, (update, time.strftime("%H:%M")), judged)
        yield (_sweep_frame(lm, update, update.message, schedules, guess, judged,
                            compute_thread.chats_so_far()) if grew
               else SweepFrame(progress=f"⏳ {update.message}"))


def _sweep_frame(lm, update: SweepUpdate, message: str, schedules: ScheduleComparison | None,
                 guess: float | None = None, judged: noise.Noise | None = None,
                 chats: int | None = None) -> SweepFrame:
    """`chats`: answered by the server during this run so far (None: a shared earlier run)."""
    cap = info_caption(lm.info, note="low quartile of each batch's decode steps", chats=chats)
    done = update.finished
    one, big = (update.points[0], update.points[-1]) if update.points else (None, None)
    quiet = quiet_reference.for_sweep(update, lm.info.dtype, judged)
    compared = (guess_md(GUESS_KEY, guess, big.gain_over(one).estimate,
                         noisy=judged is not None and judged.busy, reference=quiet)
                if done and one is not None else "")
    return SweepFrame(
        progress=text.sweep_progress_markdown(update, message),
        cards=text.sweep_cards(update, judged, quiet),
        throughput=charts.throughput_chart(update.points, cap, judged),
        step_time=charts.step_time_chart(update.points, update.bandwidth_gbs, cap),
        tradeoff=charts.tradeoff_chart(update.points, cap),
        diagram=batch_diagram(update.points, lm.info.layers, bandwidth_gbs=update.bandwidth_gbs,
                              noise=judged),
        table=text.sweep_table(update, judged) + compared,
        plan=text.plan_table(update.plans),
        sweep=replace(update, noise=judged) if done else None,  # kept: later views judge by it
        closing=text.closing_note(lm.info, update, schedules, judged) if done else None)


def padding_view(lm, settings: Settings, prompts: str) -> PaddingView:
    """The padded batch of the prompts, one per line (chat-templated, left-padded)."""
    lines = prompt_lines(settings, prompts)
    if not lines:
        return PaddingView(plot=charts.padding_chart([]), text=text.NO_PROMPTS)
    ids = [encode_prompt(lm, settings, t) for t in lines]
    padded, total = padding_waste(ids)
    return PaddingView(plot=charts.padding_chart([len(p) for p in ids], text.prompt_labels(lines)),
                       text=text.padding_markdown(len(ids), padded, total))


def workload_trace(lm, settings: Settings, workload: str, seed: int, requests: int,
                   rate: float):
    """The requests to serve and the workload's name for tables and the closing note."""
    if workload != RANDOM:
        return schedulers.preset_trace(lm.tokenizer, workload), workload
    settings.seed.check("Seed (random trace)", seed)
    settings.trace_requests.check("Requests (random trace)", requests)
    settings.trace_rate_per_s.check("Arrivals per second (random trace)", rate)
    lengths = settings.trace_new_tokens  # output lengths drawn from low..default
    trace = schedulers.random_trace(lm.tokenizer, int(requests), float(rate), int(lengths.low),
                                    int(lengths.default), int(seed))
    return trace, f"{RANDOM}, seed {int(seed)}, {int(requests)} requests at {float(rate):g}/s"


def schedule_frames(lm, settings: Settings, shared, *, workload: str, seed: int, requests: int,
                    rate_per_s: float, max_batch: int, fill_wait_s: float,
                    sweep: SweepUpdate | None = None) -> Iterator[ScheduleFrame]:
    """Serve the trace with static, then continuous batching, a progress line per forward pass."""
    settings.scheduler_batch.check("Max batch", max_batch)
    settings.fill_wait_s.check("Batch fill wait (s)", fill_wait_s)
    max_batch, fill_wait_s = int(max_batch), float(fill_wait_s)
    trace, name = workload_trace(lm, settings, workload, seed, requests, rate_per_s)
    longest = max(len(r.prompt_ids) for r in trace) + max(r.max_new_tokens for r in trace)
    batch_sweep.check_batch_fits(batch_sweep.plan_batch(
        lm, max_batch, longest, 0, budget_bytes(lm, settings, None)))
    key = shared_key(lm, "schedulers") + (name, max_batch, fill_wait_s)
    kept = reuse(shared, key)
    saved, judged = kept if kept is not None else (None, None)
    progress = text.scheduler_done_markdown(saved.when if saved else None)
    if saved is None:
        results = {}
        runs = {"static": schedulers.serve_static(lm, trace, max_batch, fill_wait_s),
                "continuous": schedulers.serve_continuous(lm, trace, max_batch)}
        for label, events in runs.items():
            for ev in events:
                if isinstance(ev, schedulers.ScheduleResult):
                    results[label] = ev
                else:
                    yield ScheduleFrame(progress=text.scheduler_step_markdown(label, ev))
        saved = ScheduleComparison(results["static"], results["continuous"], name, max_batch,
                                   time.strftime("%H:%M"))
        judged = noise.reading(settings=settings)
        keep(shared, key, saved, judged)  # a busy comparison is not shown to the next visitor
    # both timelines on one time axis, the summary chart and table, and the closing note
    st, co = saved.static, saved.continuous
    horizon = max(r.finish for r in st.requests + co.requests) * 1.03
    cap = info_caption(lm.info, note="virtual clock = sum of measured step times")
    yield ScheduleFrame(
        progress=busy_notice_html(judged) + progress,
        static=charts.gantt_chart(st, f"Static batching (max batch {max_batch})", cap, horizon),
        continuous=charts.gantt_chart(co, f"Continuous batching (max batch {max_batch})", cap,
                                      horizon),
        summary=charts.scheduler_summary_chart([st.summary, co.summary], cap),
        table=text.scheduler_table(st, co), schedules=saved,
        closing=text.closing_note(lm.info, sweep, saved))


def cost_view(lm, settings: Settings, sweep: SweepUpdate | None, *, price_per_hour: float,
              prompt_tokens: int, output_tokens: int, modes=(),
              guess: float | None = None) -> CostView:
    """Cost per token and per conversation from the last sweep at an hourly price; `modes`:
    lesson 6's `ModeReport`s, priced at batch 1; `guess`: $ per million output tokens."""
    settings.price_per_hour.check("Hardware price ($ per hour)", price_per_hour)
    settings.conversation_prompt_tokens.check("Prompt tokens per conversation", prompt_tokens)
    settings.conversation_output_tokens.check("Output tokens per conversation", output_tokens)
    price, p_in, p_out = float(price_per_hour), int(prompt_tokens), int(output_tokens)
    if sweep is None or not sweep.points:
        return CostView(plot=charts.cost_chart([], 0), table=text.NO_SWEEP_YET,
                        chain=chain_section(lm, None, [], price, p_in, p_out))
    costs = dollars.model_serving_costs(lm, sweep.points, price, p_in, p_out, sweep.bandwidth_gbs)
    return CostView(plot=charts.cost_chart(costs, price, info_caption(lm.info)),
                    table=text.cost_table(costs, p_in, p_out)
                    + guess_md(COST_GUESS_KEY, guess, costs[-1].usd_per_million_output,
                               noisy=not supports_verdict(sweep.noise))
                    + text.mode_cost_table(modes, price),
                    chain=chain_section(lm, sweep, costs, price, p_in, p_out))


def chain_section(lm, sweep: SweepUpdate | None, costs, price_per_hour: float,
                  prompt_tokens: int, output_tokens: int) -> str:
    """From KV memory to dollars: this machine's (from the sweep), published models, levers."""
    measured = None
    if sweep is not None and sweep.points and sweep.plans:
        info = lm.info
        kv = bytes_per_token(info.layers, info.kv_heads, info.head_dim, lm.bytes_per_value)
        measured = dollars.measured_chain(costs, sweep.plans[0].budget_bytes,
                                          sweep.points[0].weight_bytes, kv, prompt_tokens,
                                          output_tokens, price_per_hour, f"{info.name} here")
    mean = dollars.GPU_PROMPT + dollars.GPU_OUTPUT / 2
    bound = dollars.cache_bound_tokens_per_s(dollars.LEVER_MODEL, dollars.H200, mean)
    return text.chain_md(measured, dollars.published_chains(), dollars.H200.source,
                           dollars.levers(), dollars.LEVER_MODEL.name, bound,
                           info_caption(lm.info, alone=False))
