"""Lesson 5: two ways to serve the same stream of requests with the real model.

**Static batching** fills a batch and decodes it in lock-step until its LONGEST request ends;
**continuous batching** lets finished requests leave and waiting ones join at every step. A
*virtual clock* moves by each pass's measured seconds and jumps ahead when idle, so the timeline
is real measured steps yet replays the same way on every run.
"""
from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..config import LIMITS
from ..errors import SettingOutOfRangeError, check_range
from ..paged_batch import RowBatch
from ..stats import percentile
from ..timing import stopwatch
from ..tokens import prompt_ids

# Questions of different lengths: short prompts and long ones share the batch.
PROMPTS = (
    "Hi!",
    "Name a colour.",
    "What is the capital of France?",
    LIMITS.default_prompt,
    "Give me three tips for learning to play the guitar as an adult beginner.",
    "Write a haiku about autumn leaves falling slowly to the ground.",
    "I am planning a weekend trip to the mountains with two friends. "
    "What should we pack, and how do we stay safe if the weather changes?",
    "Summarise in one paragraph what a large language model does when it answers a question.",
)


@dataclass(frozen=True)
class Request:
    rid: int
    arrival: float  # seconds on the virtual clock
    text: str
    prompt_ids: tuple[int, ...]
    max_new_tokens: int


# name -> (arrival seconds, prompt index, max new tokens) per request
PRESETS: dict[str, tuple[tuple[float, int, int], ...]] = {
    "Steady mix": tuple((0.5 * i, i % len(PROMPTS), (6, 24, 10, 32, 8, 16)[i % 6])
                        for i in range(10)),
    "Burst then trickle": tuple([(0.0, i, n) for i, n in enumerate((8, 24, 12, 32, 6, 16))]
                                + [(1.5 + 1.0 * j, (j + 2) % len(PROMPTS), 10) for j in range(4)]),
    "One long, many short": tuple([(0.0, 7, 48)]
                                  + [(0.3 + 0.4 * j, j % 6, 6) for j in range(8)]),
}
DEFAULT_PRESET = "Steady mix"


def preset_trace(tokenizer, name: str = DEFAULT_PRESET) -> list[Request]:
    if name not in PRESETS:
        raise SettingOutOfRangeError(
            f"Unknown workload {name!r}; choose one of: {', '.join(PRESETS)}.")
    return [_request(tokenizer, rid, arrival, PROMPTS[p], n)
            for rid, (arrival, p, n) in enumerate(PRESETS[name])]


def random_trace(tokenizer, requests: int = 10, rate_per_s: float = 2.0, min_new: int = 4,
                 max_new: int = 32, seed: int = 0) -> list[Request]:
    """Poisson arrivals at `rate_per_s`, random prompts and lengths, seeded."""
    LIMITS.trace_requests.check("Requests", requests)
    LIMITS.trace_rate_per_s.check("Arrival rate (requests/s)", rate_per_s)
    LIMITS.trace_new_tokens.check("Shortest output (tokens)", min_new)
    check_range("Longest output (tokens)", max_new, min_new, LIMITS.trace_new_tokens.high)
    rng = random.Random(seed)
    clock, out = 0.0, []
    for rid in range(requests):
        text = rng.choice(PROMPTS)
        out.append(_request(tokenizer, rid, round(clock, 3), text, rng.randint(min_new, max_new)))
        clock += rng.expovariate(rate_per_s)
    return out


def _request(tokenizer, rid: int, arrival: float, text: str, max_new: int) -> Request:
    return Request(rid=rid, arrival=float(arrival), text=text,
                   prompt_ids=tuple(prompt_ids(tokenizer, text)), max_new_tokens=int(max_new))


@dataclass(frozen=True)
class SchedulerPass:
    index: int
    kind: str  # "prefill" (new requests' prompts) or "decode" (one token per row)
    start: float  # virtual clock when it began (s)
    seconds: float  # measured duration
    rows: tuple[int, ...]  # request ids in the batch for this pass
    active: tuple[int, ...]  # request ids that got a token they needed from it
    width: int  # positions per row held in the cache (padding included)


@dataclass(frozen=True)
class RequestRecord:
    """What one request experienced, on the virtual clock (seconds)."""

    rid: int
    arrival: float
    start: float  # its prefill began
    first_token: float
    finish: float
    prompt_tokens: int
    tokens: tuple[int, ...]  # the generated tokens (the end-of-turn marker included)

    @property
    def latency(self) -> float:
        return self.finish - self.arrival

    @property
    def ttft(self) -> float:
        return self.first_token - self.arrival


@dataclass(frozen=True)
class ScheduleSummary:
    scheduler: str
    requests: int
    output_tokens: int
    makespan: float  # first arrival to last finish (s)
    throughput: float  # output tokens / makespan
    mean_latency: float
    p95_latency: float
    mean_ttft: float
    p95_ttft: float
    forward_passes: int
    wasted_row_steps: int  # rows computed in a decode step although already finished


@dataclass(frozen=True)
class ScheduleResult:
    summary: ScheduleSummary
    requests: tuple[RequestRecord, ...]
    steps: tuple[SchedulerPass, ...]


class _Server:
    """The virtual clock and each request's progress."""

    def __init__(self, lm, requests: list[Request], max_batch: int) -> None:
        if not requests:
            raise SettingOutOfRangeError("The workload has no requests.")
        LIMITS.scheduler_batch.check("Max batch", max_batch)
        self.max_batch = max_batch
        self.by_id = {r.rid: r for r in requests}
        self.pending = sorted(requests, key=lambda r: (r.arrival, r.rid))
        self.waiting: list[Request] = []
        self.clock = 0.0
        self.tokens: dict[int, list[int]] = {r.rid: [] for r in requests}
        self.started: dict[int, float] = {}
        self.first: dict[int, float] = {}
        self.finish: dict[int, float] = {}
        self.steps: list[SchedulerPass] = []
        self.stop_ids = lm.stop_ids

    def busy(self) -> bool:
        return len(self.finish) < len(self.by_id)

    def admit_arrivals(self) -> None:
        while self.pending and self.pending[0].arrival <= self.clock:
            self.waiting.append(self.pending.pop(0))

    def next_arrival(self) -> float | None:
        return self.pending[0].arrival if self.pending else None

    def start_waiting(self, lm, n: int) -> tuple[list[int], RowBatch, float]:
        """Up to `n` waiting requests start: (their ids, their prompts prefilled, seconds)."""
        group, self.waiting = self.waiting[:n], self.waiting[n:]
        for r in group:
            self.started[r.rid] = self.clock
        rows = [r.rid for r in group]
        return rows, *RowBatch.prefill(lm, rows, [list(r.prompt_ids) for r in group])

    def record(self, kind: str, seconds: float, rows, active, width: int) -> SchedulerPass:
        step = SchedulerPass(len(self.steps), kind, self.clock, seconds, tuple(rows),
                          tuple(active), width)
        self.steps.append(step)
        self.clock += seconds
        return step

    def add_tokens(self, rows: list[int], tokens: list[int], active) -> None:
        for rid, tok in zip(rows, tokens):
            if rid not in active:
                continue
            self.tokens[rid].append(tok)
            self.first.setdefault(rid, self.clock)
            if tok in self.stop_ids or len(self.tokens[rid]) >= self.by_id[rid].max_new_tokens:
                self.finish[rid] = self.clock

    def result(self, name: str) -> ScheduleResult:
        recs = tuple(RequestRecord(r.rid, r.arrival, self.started[r.rid], self.first[r.rid],
                                   self.finish[r.rid], len(r.prompt_ids), tuple(self.tokens[r.rid]))
                     for r in sorted(self.by_id.values(), key=lambda r: r.rid))
        lat, ttft = [r.latency for r in recs], [r.ttft for r in recs]
        out = sum(len(r.tokens) for r in recs)
        span = max(r.finish for r in recs) - min(r.arrival for r in recs)
        wasted = sum(len(s.rows) - len(s.active) for s in self.steps if s.kind == "decode")
        summary = ScheduleSummary(
            scheduler=name, requests=len(recs), output_tokens=out, makespan=span,
            throughput=out / span if span > 0 else 0.0, mean_latency=sum(lat) / len(lat),
            p95_latency=percentile(lat, 95), mean_ttft=sum(ttft) / len(ttft),
            p95_ttft=percentile(ttft, 95), forward_passes=len(self.steps), wasted_row_steps=wasted)
        return ScheduleResult(summary, recs, tuple(self.steps))


def serve_static(lm, requests: list[Request], max_batch: int = 8, fill_wait_s: float = 1.0
                 ) -> Iterator[SchedulerPass | ScheduleResult]:
    """Fill a batch, run it until its longest request ends, then take the next batch."""
    LIMITS.fill_wait_s.check("Batch fill wait (s)", fill_wait_s)
    srv = _Server(lm, requests, max_batch)
    while srv.busy():
        srv.admit_arrivals()
        nxt = srv.next_arrival()
        if not srv.waiting:
            srv.clock = max(srv.clock, nxt)  # idle until someone arrives
            continue
        deadline = srv.waiting[0].arrival + fill_wait_s
        if len(srv.waiting) < max_batch and nxt is not None and srv.clock < deadline:
            srv.clock = min(nxt, deadline)  # wait for the batch to fill
            continue
        rows, batch, seconds = srv.start_waiting(lm, max_batch)
        yield srv.record("prefill", seconds, rows, rows, batch.width)
        srv.add_tokens(rows, batch.next_token.tolist(), rows)
        while active := [rid for rid in rows if rid not in srv.finish]:
            tokens, seconds = batch.decode(lm)  # finished rows are computed too
            yield srv.record("decode", seconds, rows, active, batch.width)
            srv.add_tokens(rows, tokens, active)
    yield srv.result("static")


def serve_continuous(lm, requests: list[Request], max_batch: int = 8
                     ) -> Iterator[SchedulerPass | ScheduleResult]:
    """At every step: finished requests leave, waiting requests join (up to `max_batch`)."""
    srv = _Server(lm, requests, max_batch)
    batch: RowBatch | None = None
    while srv.busy():
        srv.admit_arrivals()
        room = srv.max_batch - (len(batch.rows) if batch else 0)
        if srv.waiting and room > 0:
            rows, new, seconds = srv.start_waiting(lm, room)
            with stopwatch(lm.device) as t:  # merging caches costs real time too
                batch = new if batch is None else batch.join(new)
            yield srv.record("prefill", seconds + t[0], rows, rows, new.width)
            srv.add_tokens(rows, new.next_token.tolist(), rows)
            batch = _without_finished(srv, batch)
        if batch is None:
            nxt = srv.next_arrival()
            if nxt is not None and not srv.waiting:
                srv.clock = max(srv.clock, nxt)
            continue
        rows = list(batch.rows)
        tokens, seconds = batch.decode(lm)
        step = srv.record("decode", seconds, rows, rows, batch.width)
        srv.add_tokens(rows, tokens, rows)
        with stopwatch(lm.device) as t:  # finished rows leave: index selection on the cache
            batch = _without_finished(srv, batch)
        srv.clock += t[0]
        yield step
    yield srv.result("continuous")


def _without_finished(srv: _Server, batch: RowBatch) -> RowBatch | None:
    keep = [i for i, rid in enumerate(batch.rows) if rid not in srv.finish]
    if len(keep) == len(batch.rows):
        return batch
    return batch.keep(keep) if keep else None


def schedulers_tokens(prompts: Sequence[int], outputs: Sequence[int]) -> int:
    """Tokens both schedulers feed at most: static computes every row at the padded width W for
    the longest output; continuous prefills each at most at W and decodes its own output."""
    width, longest = max(prompts, default=0), max(outputs, default=0)
    return len(prompts) * (2 * width + longest) + sum(outputs)
