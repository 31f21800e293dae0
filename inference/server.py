"""The serving engine: one continuous batcher that owns the model for every visitor.

Lesson 5's continuous batching as vLLM v1's scheduler, the KV cache in pages (`paged_batch.py`).
One thread runs the loop; each step runs on the compute thread, taking turns with lesson
measurements (`compute_thread.py`). A step is planned first (`server_plan.py`: who leaves, who
is preempted, who joins, how the token budget splits), then run: the prompt chunks in one pass,
then one decode pass (a running stream waits at most one chunk's pass per token, never a whole
long prompt), each row's token chosen with its own sampling and seeded generator: exactly the
tokens it would get alone. Handlers never run the model: they `submit()` and read the events.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

import torch

from .block_pool import blocks_for
from .compute_thread import ComputeTurns
from .config import Settings
from .errors import (
    InferenceInputError,
    RequestTooLargeError,
    ServerBusyError,
    ServerStoppedError,
    SettingOutOfRangeError,
)
from .events import StepEvent
from .generation import CacheBudget, check_prompt, finish_reason, output_text, top_candidates
from .paged_batch import PagedBatch, PoolStats
from .sampling import SamplingSettings, choose, make_generator
from .served_request import ServedRequest
from .server_plan import WAIT_BLOCKS, WAIT_SHARED, StepPlan, WaitingLine, admission, split_budget
from .step_clock import StepClock, StepRecord
from .thread_choice import ThreadChoice, ThreadFigure, num_threads
from .timing import stopwatch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerStats:
    """What the live "Server" view shows, read between steps."""

    active: int  # rows in the current batch
    queued: int  # requests waiting for a row
    paused: bool  # the loop is held by `exclusive()` (a test or benchmark filling the queue)
    steps: int  # forward passes since start
    served: int  # requests finished since start
    unread: int  # requests stopped since start because nobody read their stream
    last_step_s: float  # duration of the newest forward pass (synced)
    tokens_per_s: float  # tokens given to requests over the last window (or since start)
    cache_bytes: int  # bytes of the blocks the batch holds now
    held_bytes: int  # caches visitors keep between clicks (lesson 3), under `budget`
    history: tuple[tuple[float, int, float], ...]  # (seconds ago, rows, step seconds), oldest first
    pool: PoolStats | None = None  # the block pool after the newest step
    steps_detail: tuple[StepRecord, ...] = ()  # the newest steps' budget split and parts
    step_token_budget: int = 0  # tokens per step the server spends (0 = whole prompts)
    threads: tuple[ThreadFigure, ...] = ()  # CPU threads per pass: the timed figures (CPU)


class Server:
    """Continuous batching over every visitor's request. Start it once per process."""

    def __init__(self, lm, settings: Settings | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`clock`: what an unread stream's wait is measured on (a test passes a fake one)."""
        self.lm, self.settings, self._clock = lm, settings or Settings(), clock
        s = self.settings
        if s.step_token_budget and s.step_token_budget <= s.server_rows:
            raise SettingOutOfRangeError(
                f"The step token budget ({s.step_token_budget}) must exceed the server's rows "
                f"({s.server_rows}), or a full batch leaves newcomers no tokens.")
        self._special_ids = frozenset(lm.tokenizer.all_special_ids)
        self.batch = PagedBatch.for_server(lm, s)
        self._cond = threading.Condition()
        self._waiting = WaitingLine()  # round robin by visitor
        self._running: dict[int, ServedRequest] = {}  # rid -> request in the batch
        self.last_plan: StepPlan | None = None  # the newest step's plan (read-only)
        self._threads = ThreadChoice.for_device(lm.device, s.server_threads)
        self._next_rid = self._step_no = 0
        self._closed = False
        # the account of its work since start that `stats()` reads (with `_cond`)
        self._passes: deque[tuple[float, int, float, int]] = deque()  # (time, rows, s, tokens)
        self._steps_detail: deque[StepRecord] = deque(maxlen=s.server_steps_kept)
        self._figures: tuple[ThreadFigure, ...] = ()  # CPU threads per pass (CPU only)
        self._passes_done = self._served = self._unread = 0
        self._last_pass_s, self._started = 0.0, time.perf_counter()
        self._pool = self.batch.stats()  # after the newest pass
        self.turns = ComputeTurns(self._cond, lambda: not self._closed and bool(
            self._waiting or self._running), self._chatting, s.measure_weight)
        # caches that visitors keep between clicks (lesson 3) share one memory budget
        self.budget = CacheBudget(s.held_cache_mb * 2**20, s.held_idle_s)
        self._thread = threading.Thread(target=self._run, name="llm-lab-server", daemon=True)
        self._thread.start()

    # ---- what handlers call -------------------------------------------------------------
    def submit(self, prompt_ids: list[int], sampling: SamplingSettings | None = None,
               max_new_tokens: int | None = None, candidates: int = 0,
               visitor: str = "") -> ServedRequest:
        """Queue a request; ServerBusyError when the queue is full or `visitor` ("": uncapped)
        has `Settings.visitor_chats` in flight. `candidates`: shown per event (0 for a chat)."""
        s = self.settings
        n = s.new_tokens.default if max_new_tokens is None else max_new_tokens
        check_prompt(self.lm, prompt_ids, n, s.new_tokens.low, s.new_tokens.high)
        if not self.batch.fits_ever(len(prompt_ids) + n):
            bt, have = self.batch.block_tokens, self.batch.pool.num_blocks
            raise RequestTooLargeError(
                f"This request could need {blocks_for(len(prompt_ids) + n, bt):,} blocks of {bt} "
                f"tokens (a {len(prompt_ids):,}-token prompt plus up to {n} new tokens), but the "
                f"server's KV cache pool holds only {have:,} blocks ({have * bt:,} tokens, "
                f"{have * self.batch.kv.block_bytes() / 2**20:,.1f} MB): shorten the prompt or "
                f"lower Max new tokens.")
        sampling = sampling or SamplingSettings()
        with self._cond:
            if self._closed:
                raise ServerStoppedError("The server is shutting down.")
            if len(self._waiting) >= s.server_queue:
                raise ServerBusyError(
                    f"The model is busy: {len(self._waiting)} requests are ahead of you and "
                    f"{len(self._running)} are being answered. Try again in a few seconds.")
            running = sum(1 for r in self._running.values()  # its own, not yet stopped
                          if r.visitor == visitor and not (r.cancelled or r.finished))
            if visitor and running + self._waiting.waiting(visitor) >= s.visitor_chats:
                raise ServerBusyError(
                    f"You already have {s.visitor_chats} answers running or waiting, the most one "
                    f"visitor may have at once: wait for one to finish (or press Stop), then "
                    f"ask again.")
            req = ServedRequest(self._next_rid, prompt_ids, sampling, n,
                                min(max(int(candidates), 0), s.top_k_shown),
                                make_generator(sampling, self.lm.device), visitor, self._clock)
            self._next_rid += 1
            req.ahead = self._waiting.add(req)
            self._cond.notify_all()
        return req

    def stats(self) -> ServerStats:
        window = self.settings.server_window_s  # the "last minute" of tokens/s and history
        with self._cond:
            now = time.perf_counter()
            while self._passes and now - self._passes[0][0] > window:
                self._passes.popleft()
            span = max(min(window, now - self._started), 1e-9)
            tokens = sum(t for _, _, _, t in self._passes)
            return ServerStats(
                active=len(self._running), queued=len(self._waiting),
                paused=self.turns.pauses > 0, steps=self._passes_done, served=self._served,
                unread=self._unread, last_step_s=self._last_pass_s,
                tokens_per_s=tokens / span if self._passes else 0.0,
                cache_bytes=self._pool.paged_bytes, held_bytes=self.budget.held_bytes(),
                history=tuple((round(now - t, 2), r, s) for t, r, s, _ in self._passes),
                pool=self._pool, steps_detail=tuple(self._steps_detail),
                step_token_budget=self.settings.step_token_budget, threads=self._figures)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=30)

    def _chatting(self) -> int:
        """Visitors with a request running or waiting, keyless ones each their own."""
        return len({r.visitor or f"#{r.rid}" for r in (*self._running.values(), *self._waiting)
                    if not r.cancelled})

    # ---- the loop ------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self.turns.serving():
                    self._cond.wait()
                # a running measurement spends its credit first (compute_thread.py)
                if not self._closed and not self.turns.make_way():
                    continue  # no work left (or a pause) meanwhile: wait again
                if self._closed:
                    break
                job = self.turns.queue_step(self._step)
            try:
                job.result()
            except Exception as exc:  # a failed step fails its requests, not the server
                self._fail_all(exc)
            finally:
                self.turns.step_done()
        self._fail_all(ServerStoppedError("The server stopped."), failed_step=False)

    def _step(self) -> None:
        """One step on the compute thread: plan, execute (emitting events), record."""
        clock = StepClock(self.lm.device)
        with clock.part("cache_s"):
            plan = self._schedule()
        first_tokens = self._execute(plan, clock)
        with clock.part("cache_s"):
            self._drop_finished()
        figures = self._threads.figures() if self._threads else ()
        with self._cond:
            self._steps_detail.append(clock.record(plan=plan, first_tokens=first_tokens))
            self._figures = figures

    def _schedule(self) -> StepPlan:
        """Who leaves, who is preempted for room, who joins, and how the budget is split."""
        self._stop_unread()
        self._drop_finished()
        preempted = self.batch.make_room()  # newest first
        with self._cond:
            back = [self._running.pop(rid) for rid in preempted]
            for r in back:
                r.preemptions += 1
                r.prefill_passes = 0  # its prompt is prefilled again: its event counts those
            self._waiting.put_back(back)  # the oldest of them ends at the head of the queue
        budget = self.settings.step_token_budget
        # as vLLM: nobody joins in a step that had to preempt (the room is the running rows')
        admitted, waiting = ([], WAIT_BLOCKS) if preempted else self._admit(
            budget - sum(row.pending for row in self.batch.rows.values()) if budget
            else float("inf"))
        decode, chunks = split_budget(((row.rid, row.decoding, row.pending)  # oldest first
                                       for row in self.batch.rows.values()), budget)
        plan = StepPlan(self._step_no, decode, chunks, tuple(preempted), tuple(admitted),
                        budget, waiting if self._waiting else "")
        self._step_no += 1
        with self._cond:
            self.last_plan = plan
        return plan

    def _admit(self, budget_left: float) -> tuple[list[int], str]:
        """Waiting requests join in the line's order while `admission` lets them (one whose
        next block another row computes now waits a step) -> (ids admitted, why one waits)."""
        out: list[int] = []
        why = ""
        with self._cond:
            for r in [r for r in self._waiting if r.cancelled]:
                self._waiting.drop(r)
                r._put(r.ended_by)  # its reader ends, told why if the server stopped it
            for r in list(self._waiting):
                tokens = r.prompt_ids + r.generated  # a preempted one computes its answer too
                if self.batch.computing_now(tokens):
                    why = why or WAIT_SHARED
                    continue
                reason = admission(self.batch.pool, tokens, len(self._running),
                                   self.settings.server_rows, budget_left)
                if reason:
                    return out, why or reason
                self.batch.admit(r.rid, tokens)
                budget_left -= self.batch.rows[r.rid].pending
                self._waiting.take(r)
                self._running[r.rid] = r
                r.admitted = r.admitted or time.perf_counter()
                out.append(r.rid)
        return out, why

    def _execute(self, plan: StepPlan, clock: StepClock) -> int:
        """The plan's passes, prompt chunks first, then decode rows, each followed by its rows'
        tokens -> requests whose prefill finished this step."""
        done: list[int] = []
        if plan.chunks:
            chunks = dict(plan.chunks)
            logits, seconds = self._forward(clock, "prefill", chunks)  # [C, V]
            for rid in chunks:
                self._running[rid].prefill_passes += 1  # told in its first token's event
            done = [j for j, rid in enumerate(chunks) if self.batch.rows[rid].decoding]
            self._emit([plan.chunks[j][0] for j in done], logits[done], seconds, clock,
                       rows=len(chunks), prefill=True)  # none done: only the pass is noted
        if plan.decode:
            ones = dict.fromkeys(plan.decode, 1)  # a decoding row feeds its newest token
            logits, seconds = self._forward(clock, "decode", ones)  # [B, V]
            self._emit(list(plan.decode), logits, seconds, clock)
        return len(done)

    def _forward(self, clock: StepClock, kind: str, chunks: dict[int, int]
                 ) -> tuple[torch.Tensor, float]:
        """`batch.feed(chunks)`, on a CPU at its fastest thread count -> (logits [B, V], synced
        seconds); time inside the model counts as the forward pass, the rest cache."""
        before, tokens = self.batch.forward_s, sum(chunks.values())
        with (num_threads(self._threads.choose(kind, tokens)) if self._threads
              else nullcontext(0)) as threads, stopwatch(self.lm.device) as t:
            out = self.batch.feed(chunks)
        if self._threads:
            self._threads.record(kind, tokens, threads, t[0])
            clock.threads = threads
        inside = self.batch.forward_s - before
        clock.seconds["forward_s"] += inside
        clock.seconds["cache_s"] += t[0] - inside
        return out, t[0]

    @torch.inference_mode()
    def _emit(self, rids: list[int], logits: torch.Tensor, seconds: float, clock: StepClock,
              rows: int | None = None, prefill: bool = False) -> None:
        """Each row's token, chosen with its own sampling, and its event. `rows`: rows in the
        pass (default: these); `prefill`: it ended their prompts."""
        rows, tok, block_bytes = rows or len(rids), self.lm.tokenizer, self.batch.kv.block_bytes()
        t0, handoff = time.perf_counter(), 0.0
        # One op each for every row, not one per row: a step's Python work grows with its rows.
        argmax = logits.argmax(-1).tolist()  # [B] (a sync: the logits are ready)
        for j, rid in enumerate(rids):
            r, row, row_logits = self._running[rid], self.batch.rows[rid], logits[j]  # [V]
            if r.sampling.greedy and not r.top_k_shown:  # a chat: the argmax is all it needs
                token, probs = argmax[j], None
            else:
                token, probs = choose(row_logits[None], r.sampling, r.generator)
                token, probs = int(token[0]), probs[0]
            self.batch.append(rid, token)
            r.generated.append(token)
            r.text, piece = output_text(tok, r.generated, r.text)
            r.finished = finish_reason(token, len(r.generated), self.lm.stop_ids, r.max_new_tokens)
            r.rows_per_step.append(rows)
            event = StepEvent(
                index=len(r.generated) - 1, token_id=token, piece=piece, text=r.text,
                special=token in self._special_ids, chosen_by=r.sampling.describe(),
                candidates=top_candidates(tok, row_logits, probs, r.top_k_shown),
                forward_tokens=row.computed - row.prefix_hit_tokens if prefill else 1,
                forward_seconds=seconds, seconds=seconds, cache_tokens=row.computed,
                cache_bytes=len(self.batch.pool.tables[rid]) * block_bytes, finished=r.finished,
                batch_rows=rows,
                # a prefill's record: tokens its cached prefix spared, passes its chunks took
                prefix_cached_tokens=row.prefix_hit_tokens if prefill else 0,
                prefill_passes=max(r.prefill_passes, 1) if prefill else 1)
            h0 = time.perf_counter()
            r._put(event)
            handoff += time.perf_counter() - h0
        clock.seconds["sample_s"] += time.perf_counter() - t0 - handoff
        clock.seconds["handoff_s"] += handoff
        with clock.part("cache_s"):  # the pass, for the live view and any measurement
            pool = self.batch.stats()
            with self._cond:
                if rids:
                    self.turns.served(list(rids))
                self._passes_done += 1
                self._last_pass_s, self._pool = seconds, pool
                self._passes.append((time.perf_counter(), rows, seconds, len(rids)))

    def _stop_unread(self) -> None:
        """Stop every request whose event stayed unread `Settings.unread_stream_s` (0: never)."""
        limit = self.settings.unread_stream_s
        if not limit:
            return
        now = self._clock()
        with self._cond:
            for r in [*self._running.values(), *self._waiting]:
                if not (r.cancelled or r.finished) and r.unread_s(now) > limit:
                    r.stop(ServerStoppedError(
                        f"This answer was stopped: nothing read it for {limit:g} s, so its "
                        f"place went to someone reading. Ask again to get a new one."))
                    self._unread += 1

    def _drop_finished(self) -> None:
        """Finished or cancelled rows leave the batch; their blocks go back to the pool."""
        gone = [r for r in self._running.values() if r.finished or r.cancelled]
        if not gone:
            return
        for r in gone:
            self.batch.release(r.rid)
        pool = self.batch.stats()
        with self._cond:
            for r in gone:
                del self._running[r.rid]
                if r.cancelled and not r.finished:
                    r._put(r.ended_by)  # its reader ends, told why if the server stopped it
                self._served += 1
            self._pool = pool

    def _fail_all(self, exc: Exception, failed_step: bool = True) -> None:
        """Every request in the batch (and the queue, when closing) gets one polite message."""
        if failed_step:
            log.exception("A server step failed; its requests are told to try again",
                          exc_info=exc)
        msg = exc if isinstance(exc, InferenceInputError) else ServerStoppedError(
            "The model stopped while answering this request; please try again.")
        with self._cond:
            failed = list(self._running.values()) + (list(self._waiting) if self._closed else [])
            self._running.clear()
            if self._closed:
                self._waiting = WaitingLine()
            for rid in list(self.batch.rows):
                self.batch.release(rid)
            self._pool = self.batch.stats()
        for r in failed:
            r._put(msg)
