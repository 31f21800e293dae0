"""Lesson 5: measure decode at batch sizes 1, 2, 4, ... and watch throughput climb.

A decode step reads every weight once however many rows it serves, so step time grows far more
slowly than the batch: tokens/s climbs while each request's own speed drops, until arithmetic,
not memory, bounds the step. Each timed step follows a 1-row step, so the gain compares pairs
that saw the same machine. Whether a batch fits in memory is decided BEFORE running it (sizes
over the budget are skipped, with the arithmetic):

    weights      read-only, paid once however many requests share them
    KV cache     2 × layers × kv_heads × head_dim × bytes × tokens × batch
    activations  bytes × batch × [tokens × (4 × hidden + 3 × intermediate) + heads × tokens²
                 + vocab]   (the batched prefill's transient tensors: an estimate)

The server's row cap (vLLM's `max_num_seqs`) is the knee where tokens/s stops climbing, read
from this machine's quiet batch gains (`for_server`). Left out: a knee that moves with context.
"""
from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

import psutil
import torch

from ..config import LIMITS, Settings
from ..errors import EmptyPromptError, SettingOutOfRangeError
from ..generation import decode_step, prefill
from ..kv_cache import cache_tensor_bytes, kv_cache_bytes
from ..thread_choice import fastest_threads, num_threads
from ..timing import stopwatch
from . import quiet_reference
from .noise import Robust, batch_gain, batch_step, low_quantile, low_ratio
from .roofline import ceiling_tokens_per_s, measure_read_bandwidth


@dataclass(frozen=True)
class BatchMemoryPlan:
    batch: int
    tokens_per_row: int  # prompt + generated positions held per request
    weight_bytes: int
    kv_bytes: int
    activation_bytes: int  # estimate
    budget_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.kv_bytes + self.activation_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.budget_bytes


def memory_budget_bytes(device: torch.device | str = "cpu", fraction: float = 0.5) -> int:
    """`fraction` of the memory free right now on `device` (RAM for a CPU)."""
    if not 0 < fraction <= 1:
        raise SettingOutOfRangeError(f"Memory fraction must be in (0, 1] (got {fraction!r}).")
    if torch.device(device).type == "cuda":
        return int(torch.cuda.mem_get_info(torch.device(device))[0] * fraction)
    return int(psutil.virtual_memory().available * fraction)


def plan_batch(lm, batch: int, prompt_tokens: int, new_tokens: int,
               budget_bytes: int) -> BatchMemoryPlan:
    info, tokens = lm.info, prompt_tokens + new_tokens
    inter = int(getattr(lm.model.config, "intermediate_size", 4 * info.hidden_size))
    per_row = (prompt_tokens * (4 * info.hidden_size + 3 * inter)
               + info.heads * prompt_tokens ** 2 + info.vocab_size)  # activation values
    kv = kv_cache_bytes(info.layers, info.kv_heads, info.head_dim, lm.bytes_per_value, tokens,
                        batch)
    return BatchMemoryPlan(batch, tokens, info.weight_bytes, kv,
                           lm.bytes_per_value * batch * per_row, budget_bytes)


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB"


def check_batch_fits(plan: BatchMemoryPlan) -> None:
    if plan.fits:
        return
    raise SettingOutOfRangeError(
        f"Batch {plan.batch} would need about {_mb(plan.total_bytes)} (weights "
        f"{_mb(plan.weight_bytes)} + KV cache {_mb(plan.kv_bytes)} for {plan.tokens_per_row} "
        f"tokens per request + activations ~{_mb(plan.activation_bytes)}, estimated), but the "
        f"memory budget is {_mb(plan.budget_bytes)}. Choose a smaller batch, fewer tokens, "
        f"or a larger budget.")


def largest_fitting_batch(lm, sizes: list[int], prompt_tokens: int, new_tokens: int,
                          budget_bytes: int) -> int:
    """The largest of `sizes` that fits; raises (with batch 1's arithmetic) if none does."""
    fitting = [b for b in sizes if plan_batch(lm, b, prompt_tokens, new_tokens, budget_bytes).fits]
    if not fitting:
        check_batch_fits(plan_batch(lm, min(sizes), prompt_tokens, new_tokens, budget_bytes))
    return max(fitting)


@dataclass(frozen=True)
class BatchPoint:
    batch: int
    prompt_tokens: int  # per request
    prefill_seconds: float  # all B prompts in one pass
    step_seconds: float  # robust decode step: low quantile of step_times (every row one token)
    step_times: tuple[float, ...]
    cache_bytes: int  # KV cache after the last step, all rows
    weight_bytes: int
    impossible: str | None = None  # why this size's figure cannot be right, measured twice
    threads: int = 0  # CPU threads the timed steps ran at (0: not recorded)
    one_row_times: tuple[float, ...] = ()  # 1-row steps, each timed right before one of these

    @property
    def mean_context(self) -> float:
        """Positions each row attended to on average over the timed steps."""
        return self.prompt_tokens + len(self.step_times) / 2

    @property
    def tokens_per_s(self) -> float:
        """All requests' tokens per second."""
        return self.batch / self.step_seconds

    @property
    def per_request_tokens_per_s(self) -> float:
        """What one user sees: their own tokens per second."""
        return 1.0 / self.step_seconds

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.batch * self.prompt_tokens / self.prefill_seconds

    def gain_over(self, one: BatchPoint) -> Robust:
        """Throughput ÷ batch 1's, against the 1-row steps timed beside these if any."""
        ones = self.one_row_times or one.step_times
        return low_ratio(ones, self.step_times, scale=self.batch / one.batch)

    def floor_seconds(self, bandwidth_gbs: float) -> float:
        """Theoretical: bytes read per step (weights + KV cache) ÷ memory bandwidth."""
        return 1 / ceiling_tokens_per_s(bandwidth_gbs, self.weight_bytes + self.cache_bytes)


@dataclass(frozen=True)
class SweepUpdate:
    """Progress of a sweep; the last (finished=True) is the result."""

    points: tuple[BatchPoint, ...]
    plans: tuple[BatchMemoryPlan, ...]  # every size asked for, fitting or not
    batch: int  # running now (0 when finished)
    step: int
    steps: int
    bandwidth_gbs: float  # measured read bandwidth (sum of a large buffer)
    message: str
    finished: bool = False
    noise: object = None  # the noise rule's `Noise` for the finished sweep (set by the lesson)


def sweep_sizes(max_batch: int) -> list[int]:
    """1, 2, 4, ... up to max_batch (max_batch itself included)."""
    LIMITS.batch.check("Largest batch", max_batch)
    return [1 << i for i in range((max_batch - 1).bit_length())] + [max_batch]


@torch.inference_mode()
def run_sweep(lm, prompt: list[int], max_batch: int = 32, decode_steps: int = 12,
              budget_bytes: int = 8 * 10**9,
              bandwidth_gbs: float | None = None) -> Iterator[SweepUpdate]:
    """Decode B copies of `prompt` for each batch size; yields progress after every step."""
    if not prompt:
        raise EmptyPromptError("The sweep needs a non-empty prompt.")
    LIMITS.sweep_decode_steps.check("Decode steps", decode_steps)
    sizes = sweep_sizes(max_batch)
    plans = tuple(plan_batch(lm, b, len(prompt), decode_steps + 1, budget_bytes) for b in sizes)
    cap = largest_fitting_batch(lm, sizes, len(prompt), decode_steps + 1, budget_bytes)
    device = lm.device
    bandwidth = bandwidth_gbs or measure_read_bandwidth(device)
    points: list[BatchPoint] = []
    lane = {}  # the 1-row lane: batch 1's cache and token, stepped beside the rest

    def measure(b: int, again: str = "") -> Iterator[SweepUpdate]:
        ids = torch.tensor([prompt] * b, device=device)  # [B, S]
        yield SweepUpdate(tuple(points), plans, b, 0, decode_steps, bandwidth,
                          f"{again}Batch {b}: prefilling {b} × {len(prompt)} prompt tokens…")
        first = prefill(lm.model, ids)
        token = first.logits.argmax(-1)  # [B]
        yield SweepUpdate(tuple(points), plans, b, 0, decode_steps, bandwidth,
                          f"Batch {b}: prefilled in {first.seconds:.2f} s; warm-up steps "
                          "(not counted)…")  # each yield ends a lesson's job: the server steps

        def warm_up() -> None:  # not counted: on a CPU, run at 2 thread counts to pick one
            nonlocal token
            token = decode_step(lm.model, token, first.cache).argmax(-1)

        threads = fastest_threads(warm_up, device, repeats=1)
        times, beside = [], []
        for step in range(decode_steps):
            if lane and b > 1:  # a 1-row step first: the pair shares the machine's state
                with num_threads(threads), stopwatch(device) as t:
                    lane["token"] = decode_step(lm.model, lane["token"], lane["cache"]).argmax(-1)
                beside.append(t[0])
            with num_threads(threads), stopwatch(device) as t:
                token = decode_step(lm.model, token, first.cache).argmax(-1)  # [B]
            times.append(t[0])
            yield SweepUpdate(tuple(points), plans, b, step + 1, decode_steps, bandwidth,
                              f"Batch {b}: decode step {step + 1}/{decode_steps} "
                              f"({t[0] * 1000:.0f} ms)")
        if b == 1 and not lane:
            lane.update(token=token, cache=first.cache)
        return BatchPoint(b, len(prompt), first.seconds, low_quantile(times), tuple(times),
                          cache_tensor_bytes(first.cache), lm.info.weight_bytes, threads=threads,
                          one_row_times=tuple(beside))

    for b in [s for s in sizes if s <= cap]:
        point = yield from measure(b)
        if points and impossible_point(points[0], point):  # either size may have been slowed:
            again = f"Impossible figure: measuring batch {points[0].batch} and {b} once more. "
            one = yield from measure(points[0].batch, again)
            retry = yield from measure(b, again)
            points[0] = min(points[0], one, key=lambda p: p.step_seconds)  # only adds time
            point = replace(retry, impossible=impossible_point(points[0], retry))
        points.append(point)
    skipped = [p.batch for p in plans if not p.fits]
    note = f" Skipped (over the memory budget): {', '.join(map(str, skipped))}." if skipped else ""
    yield SweepUpdate(tuple(points), plans, 0, decode_steps, decode_steps, bandwidth,
                      f"Done: {len(points)} batch sizes measured.{note}", finished=True)


def impossible_point(one: BatchPoint, point: BatchPoint) -> str | None:
    """Why `point` cannot be right against the 1-row point `one` (None: it can)."""
    rows, gain = point.batch // one.batch, point.gain_over(one).estimate  # one: batch 1
    return (batch_gain(rows, gain)
            or batch_step(rows, point.step_seconds, gain * point.step_seconds / rows))


def batch_sweep_tokens(prompt: int, max_batch: int, decode_steps: int) -> int:
    """Tokens `run_sweep` feeds at most (no size measured again): per size b, b rows of the
    prompt, two warm-up and `decode_steps` timed steps; past batch 1, a 1-row step beside each."""
    sizes = sweep_sizes(max_batch)
    return (sum(b * (prompt + decode_steps + 2) for b in sizes)
            + decode_steps * (len(sizes) - 1))


# No sweep on file: 64 rows. A class of 60 then gets its first tokens together (at 32, 28 of
# them waited for a whole answer), and the block pool holds it (`pool_rows` cuts it if not).
FALLBACK_ROWS = 64
MIN_ROWS = 8  # fewer rows and a class waits in turns; past the knee a row costs no throughput
MARGIN = 0.10  # tokens/s must rise by more than this share to count (the noise of a quiet run)
ROW_TOKENS = 256  # a chat's cache for the memory cap: a question and a few paragraphs
GAIN_KEY = re.compile(r"batch_gain (\d+)÷1 ")


def knee_rows(sweep: Sequence[tuple[int, float]], margin: float = MARGIN) -> int:
    """The largest batch whose tokens/s beats every smaller batch's by more than `margin`
    (a share): past it, step time grows as fast as the rows. `sweep`: (rows, tokens/s).

    Linear to the end (the weights' bytes set the pace throughout): the largest batch.
    >>> knee_rows([(1, 30), (2, 59), (4, 117), (8, 230)])
    8

    Flat (each row costs a full step): one row.
    >>> knee_rows([(1, 100), (2, 101), (4, 99), (8, 100)])
    1

    A rise, then a wobble within the margin: where the rise ended, a dip notwithstanding.
    >>> knee_rows([(1, 30), (2, 58), (4, 110), (8, 180), (16, 175), (32, 190), (64, 150)])
    8
    """
    points = sorted(sweep)
    best_rows, best = points[0]
    for rows, tokens_per_s in points[1:]:
        if tokens_per_s > best * (1 + margin):
            best_rows, best = rows, tokens_per_s
    return best_rows


def sweep_on_file(path: str | None = None, machine: str | None = None) -> list[tuple[int, float]]:
    """This machine's quiet batch gains on file as (rows, relative tokens/s), the highest per
    size; [] if none."""
    gains: dict[int, float] = {}
    for key, figure in quiet_reference.read(path, machine).items():
        if m := GAIN_KEY.match(key):
            gains[int(m[1])] = max(gains.get(int(m[1]), 0.0), figure.value)
    return sorted({1: 1.0, **gains}.items()) if gains else []


@dataclass(frozen=True)
class RowChoice:
    rows: int
    why: str


def choose_rows(sweep: Sequence[tuple[int, float]], memory_rows: int,
                budget_rows: int) -> RowChoice:
    """The cap from a sweep ([]: none on file), cut to `memory_rows` and `budget_rows`.

    >>> choose_rows([(1, 1.0), (16, 14.0), (64, 15.0)], memory_rows=88, budget_rows=255).rows
    16
    >>> choose_rows([(1, 1.0), (4, 3.0)], 88, 255).why  # the knee lies beyond 4
    'tokens/s still rising at 4 rows, the largest batch on file: 64 (the fallback)'
    >>> choose_rows([], memory_rows=20, budget_rows=255).why
    'no batch sweep on file for this machine: 64, cut to 20 by the block pool'
    """
    if not sweep:
        rows, why = FALLBACK_ROWS, f"no batch sweep on file for this machine: {FALLBACK_ROWS}"
    elif (knee := knee_rows(sweep)) == max(r for r, _ in sweep):
        rows = max(knee, FALLBACK_ROWS)
        why = (f"tokens/s still rising at {knee} rows, the largest batch on file: "
               f"{rows}" + (" (the fallback)" if rows > knee else ""))
    else:
        rows = max(knee, MIN_ROWS)
        why = f"this machine's batch sweep levels off after {knee} rows: {rows}"
    if rows > min(memory_rows, budget_rows):
        rows = min(memory_rows, budget_rows)
        why += f", cut to {rows} by the " + ("block pool" if memory_rows <= budget_rows
                                            else "step's token budget")
    return RowChoice(max(1, rows), why)


def pool_rows(lm, settings: Settings) -> int:
    """Rows of `ROW_TOKENS` the server's block pool holds (sized as `PagedBatch.for_server`)."""
    info = lm.info
    per_block = kv_cache_bytes(info.layers, info.kv_heads, info.head_dim, lm.bytes_per_value,
                               tokens=settings.block_tokens)
    blocks = settings.server_pool_blocks or max(1, settings.server_cache_mb * 2**20 // per_block)
    return max(1, blocks // math.ceil(ROW_TOKENS / settings.block_tokens))


def for_server(settings: Settings, lm, reference: str | None = None,
               env: Mapping[str, str] | None = None) -> RowChoice:
    """LLM_LAB_SERVER_ROWS when set above 0, else `choose_rows` from this machine's quiet batch
    sweep (`reference`: its file)."""
    value = (os.environ if env is None else env).get("LLM_LAB_SERVER_ROWS", "").strip()
    if value.isdigit() and int(value) > 0:
        return RowChoice(settings.server_rows, "set by LLM_LAB_SERVER_ROWS")
    budget = settings.step_token_budget - 1 if settings.step_token_budget else 1 << 30
    return choose_rows(sweep_on_file(reference), pool_rows(lm, settings), budget)
