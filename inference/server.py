"""The serving engine: one continuous batcher that owns the model for every visitor.

This is lesson 5's continuous batching, serving the room for real. One thread runs the loop:

1. between steps, requests waiting in the queue are admitted while there is a free row and
   room for their KV cache. By default the cache is PAGED (PagedAttention, `server_rows.py`):
   one pool of fixed-size blocks, sized from `server_cache_mb`; a request is admitted when the
   blocks its prompt needs now are free, and the full blocks its prompt shares with earlier
   ones (the chat template, a teacher's pasted prompt) are mapped, not computed again;
2. CHUNKED PREFILL (vLLM's scheduler; `Settings.step_token_budget`, paged layout): each step
   first decodes every running row (one token each), then spends the rest of the budget on
   newcomers' uncached prompt tokens, oldest first, a chunk each; a request's first token is
   chosen from the logits of its LAST chunk. The chunks run as a second forward pass within
   the step, not inside the decode pass: our paged forward takes rows of equal query length
   (left-padded), so 30 one-token decode rows beside a 256-token chunk would be padded to
   256 queries each. A running stream therefore waits at most one chunk's pass per token,
   never a whole long prompt. With budget 0 (or the padded layout) newcomers are prefilled
   whole before the decode pass (rows of similar length share a left-padded pass) and the
   running rows wait for it: prefill-decode interference, kept for the comparison.
   Newcomers join the batch copying no cache tensor;
3. every row whose last block is full takes a new one; when the pool is out of blocks the
   newest row is preempted: its blocks go back, it returns to the FRONT of the queue, and on
   resuming its prompt and tokens so far are prefilled again (its seeded generator kept);
4. then every active row gets its next token from ONE shared decode pass, each chosen
   with that request's own sampling settings and seeded generator, so a request gets exactly
   the tokens it would get alone;
5. finished, stopped or abandoned requests leave the batch at the next step; their blocks go
   back to the pool (keyed full blocks stay cached until the pool needs the room).

Every step leaves a `StepRecord` (`step_record.py`): its budget split (decode tokens,
prefill-chunk tokens, rows) and its parts' synced times (forward pass, cache work, sampling +
detokenizing, handing events to handlers); `ServerStats.steps_detail` keeps the newest.

A lesson measurement (a sweep, a race) does not stop the server: it runs as a series of jobs
on the one compute thread, each job through `turn()`, which queues it only after a server step
queued since the previous measurement job (of any measurement). The compute thread runs jobs
in order, so while anyone chats, at most one measurement job runs between two server steps,
and each timed pass (inside one job) still has the cores to itself. `alongside()` counts the
chats served meanwhile, for the measurement's caption. `exclusive()` still stops the loop
(tests and benchmarks use it to fill the queue before a step). That turn-taking lives in
`server_turns.py`; this file is the batcher's steps. Handlers never run the model
for generation themselves: they `submit()` and read their request's events. The loop's thread
only schedules: each step's arithmetic runs on the compute thread, as every lesson's does.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from contextlib import nullcontext
from dataclasses import dataclass

import torch

from . import compute_thread
from .cache_budget import CacheBudget
from .config import Settings
from .errors import (
    InferenceInputError,
    PromptTooLongError,
    ServerBusyError,
    ServerStoppedError,
    SettingOutOfRangeError,
)
from .events import StepEvent
from .generation import finish_reason, output_text, top_candidates
from .paged_batch import PoolStats
from .sampling import SamplingSettings, choose, make_generator, shaped_probabilities
from .served_request import ServedRequest
from .server_rows import make_rows
from .server_turns import TakingTurns
from .step_record import StepClock, StepRecord
from .thread_choice import ThreadChoice, ThreadFigure
from .timing import stopwatch

__all__ = ["Server", "ServerStats", "ServedRequest", "ServerBusyError", "ServerStoppedError"]
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerStats:
    """What the live "Server" view shows, read between steps."""

    active: int  # rows in the current batch
    queued: int  # requests waiting for a row
    paused: bool  # the loop is held by `exclusive()` (a test or benchmark filling the queue)
    steps: int  # forward passes since start
    served: int  # requests finished since start
    last_step_s: float  # duration of the newest forward pass (synced)
    tokens_per_s: float  # tokens given to requests over the last window (or since start)
    cache_bytes: int  # bytes of the batch's key/value cache now (paged: the blocks held)
    held_bytes: int  # caches visitors keep between clicks (lesson 3), under `budget`
    history: tuple[tuple[float, int, float], ...]  # (seconds ago, rows, step seconds), oldest first
    kv_layout: str = "paged"  # "paged" (block pool) or "padded" (one left-padded tensor)
    pool: PoolStats | None = None  # the block pool after the newest step (None when padded)
    steps_detail: tuple[StepRecord, ...] = ()  # the newest steps' budget split and parts
    step_token_budget: int = 0  # tokens per step the server spends (0 = unchunked)
    threads: tuple[ThreadFigure, ...] = ()  # CPU threads per pass: the timed figures (CPU)


class Server(TakingTurns):
    """Continuous batching over every visitor's request. Start it once per process."""

    def __init__(self, lm, settings: Settings | None = None) -> None:
        self.lm, self.settings = lm, settings or Settings()
        # read once: the tokenizer's property rebuilds its list on every call
        self._special_ids = frozenset(lm.tokenizer.all_special_ids)
        self._cond = threading.Condition()
        self._waiting: deque[ServedRequest] = deque()
        self._rows = make_rows(lm, self.settings)  # the batch's KV cache: paged or padded
        budget = self.settings.step_token_budget
        if budget and budget <= self.settings.server_rows:
            raise SettingOutOfRangeError(
                f"The step token budget ({budget}) must exceed the server's rows "
                f"({self.settings.server_rows}), or a full batch leaves newcomers no tokens.")
        self._budget = budget if self._rows.chunks else 0  # padded rows join whole
        self._prefilling: dict[int, int] = {}  # rid -> prompt tokens computed so far, oldest first
        self._details: deque[StepRecord] = deque(maxlen=self.settings.server_steps_kept)
        self._step_no = 0  # steps since start (a step may run two forward passes)
        self._pool: PoolStats | None = self._rows.pool_stats()  # read by stats()
        # CPU threads per pass, chosen by timing the passes (None on a GPU)
        self._threads = ThreadChoice.for_device(lm.device, self.settings.server_threads)
        self._thread_figures: tuple[ThreadFigure, ...] = ()  # read by stats()
        self._by_row: dict[int, ServedRequest] = {}  # rid -> request in the batch
        self._next_rid = 0
        self._init_turns()
        self._closed = False
        self._steps = self._served = 0
        self._last_step = 0.0
        self._started = time.perf_counter()
        self._log: deque[tuple[float, int, float, int]] = deque()  # (time, rows, seconds, tokens)
        self._cache_bytes = 0  # after the newest step (read by stats())
        # caches that visitors keep between clicks (lesson 3) share one memory budget
        self.budget = CacheBudget(self.settings.held_cache_mb * 2**20, self.settings.held_idle_s)
        self._thread = threading.Thread(target=self._run, name="llm-lab-server", daemon=True)
        self._thread.start()

    # ---- what handlers call -------------------------------------------------------------
    def submit(self, prompt_ids: list[int], sampling: SamplingSettings | None = None,
               max_new_tokens: int | None = None, candidates: int = 0) -> ServedRequest:
        """Queue a request; raise ServerBusyError (with a plain message) when the queue is full.
        `candidates`: how many top candidates each event lists (0 for a chat, which shows
        none: listing them costs a softmax and ten token decodes per row and step)."""
        s = self.settings
        n = s.new_tokens.default if max_new_tokens is None else max_new_tokens
        if isinstance(n, bool) or not isinstance(n, int):
            raise SettingOutOfRangeError(f"Max new tokens must be a whole number (got {n!r}).")
        s.new_tokens.check("Max new tokens", n)
        if not prompt_ids:
            raise SettingOutOfRangeError("The prompt is empty: type some text first.")
        if len(prompt_ids) + n > self.lm.info.context_window:
            raise PromptTooLongError(
                f"The prompt ({len(prompt_ids):,} tokens) plus {n} new tokens exceeds the model's "
                f"context window of {self.lm.info.context_window:,} tokens.")
        self._rows.check_fits(len(prompt_ids), n)
        sampling = sampling or SamplingSettings()
        with self._cond:
            if self._closed:
                raise ServerStoppedError("The server is shutting down.")
            if len(self._waiting) >= s.server_queue:
                raise ServerBusyError(
                    f"The model is busy: {len(self._waiting)} requests are ahead of you and "
                    f"{len(self._by_row)} are being answered. Try again in a few seconds.")
            req = ServedRequest(self._next_rid, prompt_ids, sampling, n,
                                min(max(int(candidates), 0), s.top_k_shown),
                                make_generator(sampling, self.lm.device), ahead=len(self._waiting))
            self._next_rid += 1
            self._waiting.append(req)
            self._cond.notify_all()
        return req

    def stats(self) -> ServerStats:
        with self._cond:
            now = time.perf_counter()
            self._forget_old(now)
            span = max(min(self.settings.server_window_s, now - self._started), 1e-9)
            tokens = sum(t for _, _, _, t in self._log)
            return ServerStats(
                active=len(self._by_row), queued=len(self._waiting), paused=self._pauses > 0,
                steps=self._steps, served=self._served, last_step_s=self._last_step,
                tokens_per_s=tokens / span if self._log else 0.0,
                cache_bytes=self._cache_bytes, held_bytes=self.budget.held_bytes(),
                history=tuple((round(now - t, 2), r, s) for t, r, s, _ in self._log),
                kv_layout=self._rows.kind, pool=self._pool,
                steps_detail=tuple(self._details), step_token_budget=self._budget,
                threads=self._thread_figures)

    def _serving(self) -> bool:
        """The loop will queue another step (call with `_cond` held)."""
        return not self._closed and not self._pauses and bool(self._waiting or self._by_row)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=30)

    # ---- the loop ------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (self._pauses or not (self._waiting or self._by_row)):
                    self._cond.wait()
                if self._closed:
                    break
                self._in_step = True
                newcomers = self._admit()
                # queued under the lock, so turn() sees it counted only once it is queued
                job = compute_thread.submit(self._timed, self._step, (newcomers,), -1)
                self._steps_queued += 1
                self._cond.notify_all()
            try:
                job.result()
            except Exception as exc:  # a failed step fails its requests, not the server
                self._fail_all(exc)
            finally:
                with self._cond:
                    self._in_step = False
                    self._cond.notify_all()
        self._fail_all(ServerStoppedError("The server stopped."), failed_step=False)

    def _admit(self) -> list[ServedRequest]:
        """Pop waiting requests, oldest (or preempted) first, while a row is free and the
        cache layout has room (paged: the blocks the prompt needs now; padded: the worst case
        of every row). An empty batch always admits one request. A request whose prompt's
        next block another row is computing this very step stays in its place (paged: it
        maps that block once written instead of computing it again) and those behind it
        go ahead."""
        s, out = self.settings, []
        for r in [r for r in self._waiting if r.cancelled]:
            self._waiting.remove(r)
            r._put(None)
        rows = list(self._by_row.values())
        for cand in list(self._waiting):
            if len(rows) + len(out) >= s.server_rows:
                break
            if self._rows.waits_for_shared(cand):
                continue  # its next block is being computed: it maps it at a later step
            if not self._rows.admit(cand, rows, out):
                break  # wait for rows to finish and give their memory back
            self._waiting.remove(cand)
            out.append(cand)
            if cand.admitted is None:
                cand.admitted = time.perf_counter()
        return out

    def _step(self, newcomers: list[ServedRequest]) -> None:
        clock = StepClock(self.lm.device)
        with clock.part("cache_s"):
            self._drop_finished()
        for r in newcomers:  # in the batch first: a failed prefill tells them too
            self._by_row[r.rid] = r
        split = (self._chunked_step(newcomers, clock) if self._budget
                 else self._whole_step(newcomers, clock))
        with clock.part("cache_s"):
            self._drop_finished()
        figures = self._threads.figures() if self._threads else ()
        with self._cond:
            self._details.append(clock.record(index=self._step_no, budget_tokens=self._budget,
                                              **split))
            self._step_no += 1
            self._thread_figures = figures

    def _whole_step(self, newcomers: list[ServedRequest], clock: StepClock) -> dict:
        """Unchunked: prefill the newcomers whole, then decode every row (newcomers too)."""
        fed: list[int] = []
        if newcomers:
            tokens = sum(len(r.prompt_ids) + len(r.generated) for r in newcomers)
            (logits, fed), seconds = self._forward(clock, "prefill", tokens,
                                                   self._rows.prefill, newcomers)
            self._emit(newcomers, logits, seconds, fed, clock)  # logits: [N, V]
            with clock.part("cache_s"):
                self._drop_finished()
        rids: list[int] = []
        if self._by_row:  # after a prefill too, so running rows never starve
            with clock.part("cache_s"):
                self._preempt(self._rows.make_room())
        if self._by_row:
            (rids, logits), seconds = self._forward(clock, "decode", len(self._by_row),
                                                    self._rows.decode)  # [B, V]
            self._emit([self._by_row[rid] for rid in rids], logits, seconds, None, clock)
        chunk = tuple(r.rid for r in newcomers)
        return dict(decode_tokens=len(rids), prefill_tokens=sum(fed),
                    rows=len(set(rids) | set(chunk)), prefill_rows=len(chunk),
                    first_tokens=len(chunk), decoded_rids=tuple(rids), chunk_rids=chunk)

    def _chunked_step(self, newcomers: list[ServedRequest], clock: StepClock) -> dict:
        """Decode every running row first, then the budget's rest goes to prompt chunks."""
        for r in newcomers:
            self._prefilling[r.rid] = 0
        with clock.part("cache_s"):
            self._preempt(self._rows.make_room())
        decoding = [rid for rid in self._by_row if rid not in self._prefilling]
        if decoding:  # the layout decodes exactly the rows not mid-prefill
            (decoding, logits), seconds = self._forward(clock, "decode", len(decoding),
                                                        self._rows.decode)  # [B, V]
            self._emit([self._by_row[rid] for rid in decoding], logits, seconds, None, clock)
        left, chunks = self._budget - len(decoding), {}
        for rid in self._prefilling:  # oldest first, as vLLM's waiting queue
            if left <= 0:
                break
            chunks[rid] = min(self._rows.pending(rid), left)
            left -= chunks[rid]
        done: list[int] = []
        if chunks:
            logits, seconds = self._forward(clock, "prefill", sum(chunks.values()),
                                            self._rows.prefill_chunks, chunks)  # [C, V]
            for rid, n in chunks.items():
                self._prefilling[rid] += n
                self._by_row[rid].prefill_passes += 1  # told in its first token's event
            done = [j for j, rid in enumerate(chunks) if self._rows.pending(rid) == 0]
            reqs = [self._by_row[list(chunks)[j]] for j in done]
            fed = [self._prefilling.pop(r.rid) for r in reqs]
            if reqs:  # their last chunk: the first token comes from its last position
                self._emit(reqs, logits[done], seconds, fed, clock, rows=len(chunks))
            else:
                self._note_pass(len(chunks), seconds, 0)
        return dict(decode_tokens=len(decoding), prefill_tokens=sum(chunks.values()),
                    rows=len(decoding) + len(chunks), prefill_rows=len(chunks),
                    first_tokens=len(done), decoded_rids=tuple(decoding),
                    chunk_rids=tuple(chunks))

    def _forward(self, clock: StepClock, kind: str, tokens: int, call, *args):
        """Run one of the layout's model calls -> (its result, its synced seconds); the time
        inside the model counts as the forward pass, the rest of the call as cache work. On
        a CPU the pass runs at the thread count its shape (`kind`, `tokens`) was fastest at
        (`thread_choice.py`), and its time is recorded for the next choice."""
        before = self._rows.forward_seconds()
        with (self._threads.run(kind, tokens) if self._threads else nullcontext(0)) as threads:
            with stopwatch(self.lm.device) as t:
                out = call(*args)
        if self._threads:
            self._threads.record(kind, tokens, threads, t[0])
            clock.threads = threads
        after = self._rows.forward_seconds()
        inside = t[0] if before is None else after - before
        clock.add("forward_s", inside)
        clock.add("cache_s", t[0] - inside)
        return out, t[0]

    def _preempt(self, rids: list[int]) -> None:
        """Preempted rows (newest first) go back to the front of the queue, oldest at the head;
        they keep their tokens and generator, and continue with the same tokens."""
        with self._cond:
            for rid in rids:
                r = self._by_row.pop(rid)
                self._prefilling.pop(rid, None)  # its chunks so far are prefilled again
                r.preemptions += 1
                self._waiting.appendleft(r)

    @torch.inference_mode()
    def _emit(self, reqs: list[ServedRequest], logits: torch.Tensor, seconds: float,
              fed: list[int] | None, clock: StepClock, rows: int | None = None) -> None:
        """Choose each row's token with its own sampling, send its event, set its next input.
        `fed`: tokens each request's prefill computed (None for a decode step: one each).
        `rows`: rows in the forward pass (default: these requests). Handing the events over
        is timed apart from choosing and detokenizing."""
        rows, tok = rows or len(reqs), self.lm.tokenizer
        t0, handoff = time.perf_counter(), 0.0
        # One op each for every row, not one per row: a step's Python work grows with its rows.
        argmax = logits.argmax(-1).tolist()  # [B] (a sync: the logits are ready)
        for j, r in enumerate(reqs):
            row_logits = logits[j]  # [V]
            if r.sampling.greedy and not r.top_k_shown:  # a chat: the argmax is all it needs
                token, probs, raw = argmax[j], None, None
            else:
                token, probs = choose(row_logits[None], r.sampling, r.generator)
                token, probs = int(token[0]), probs[0]
                raw = (probs if r.sampling.greedy
                       else shaped_probabilities(row_logits, SamplingSettings()))  # softmax
            self._rows.set_token(r.rid, token)
            before = r.text
            r.generated.append(token)
            r.text, piece = output_text(tok, r.generated, before)
            r.finished = finish_reason(token, len(r.generated), self.lm.stop_ids, r.max_new_tokens)
            r.rows_per_step.append(rows)
            event = StepEvent(
                index=len(r.generated) - 1, token_id=token, piece=piece, text=r.text,
                special=token in self._special_ids,
                candidates=(top_candidates(tok, raw, probs, r.top_k_shown)
                            if r.top_k_shown else ()),
                chosen_by=r.sampling.describe(),
                forward_tokens=fed[j] if fed else 1, forward_seconds=seconds,
                seconds=seconds, cache_tokens=self._rows.cache_tokens(r.rid),
                cache_bytes=self._rows.row_bytes(r.rid),
                finished=r.finished, batch_rows=r.rows_per_step[-1],
                # a prefill's record: tokens its cached prefix spared, passes its chunks took
                prefix_cached_tokens=len(r.prompt_ids) + len(r.generated) - 1 - fed[j] if fed
                else 0, prefill_passes=max(r.prefill_passes, 1) if fed else 1)
            h0 = time.perf_counter()
            r._put(event)
            handoff += time.perf_counter() - h0
        clock.add("sample_s", time.perf_counter() - t0 - handoff)
        clock.add("handoff_s", handoff)
        with clock.part("cache_s"):
            self._note_pass(rows, seconds, len(reqs), tuple(r.rid for r in reqs))

    def _note_pass(self, rows: int, seconds: float, tokens: int,
                   served: tuple[int, ...] = ()) -> None:
        """A forward pass for the live view: its rows, its seconds, the tokens it gave (to the
        requests `served`, told to any measurement running meanwhile)."""
        pool, cache_bytes = self._rows.pool_stats(), self._rows.cache_bytes()
        with self._cond:
            for seen in self._alongside if served else ():
                seen.saw(list(served))
            self._steps += 1
            self._last_step = seconds
            self._pool, self._cache_bytes = pool, cache_bytes
            self._log.append((time.perf_counter(), rows, seconds, tokens))

    def _drop_finished(self) -> None:
        """Finished or cancelled rows leave the batch; their cache memory goes back."""
        gone = [r for r in self._by_row.values() if r.finished or r.cancelled]
        if not gone:
            return
        self._rows.drop([r.rid for r in gone])
        pool, cache_bytes = self._rows.pool_stats(), self._rows.cache_bytes()
        with self._cond:
            for r in gone:
                del self._by_row[r.rid]
                self._prefilling.pop(r.rid, None)
                if r.cancelled and not r.finished:
                    r._put(None)
                self._served += 1
            self._pool, self._cache_bytes = pool, cache_bytes

    def _fail_all(self, exc: Exception, failed_step: bool = True) -> None:
        """Every request in the batch (and the queue, when closing) gets one polite message;
        a failed step is logged first with its trace, for whoever runs the server."""
        if failed_step:
            log.exception("A server step failed; its requests are told to try again",
                          exc_info=exc)
        msg = exc if isinstance(exc, InferenceInputError) else ServerStoppedError(
            "The model stopped while answering this request; please try again.")
        with self._cond:
            failed = list(self._by_row.values()) + (list(self._waiting) if self._closed else [])
            self._by_row.clear()
            self._prefilling.clear()
            if self._closed:
                self._waiting.clear()
            self._rows.clear()
            self._pool, self._cache_bytes = self._rows.pool_stats(), 0
        for r in failed:
            r._put(msg)

    def _forget_old(self, now: float) -> None:
        while self._log and now - self._log[0][0] > self.settings.server_window_s:
            self._log.popleft()
