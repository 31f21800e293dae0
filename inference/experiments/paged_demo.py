"""Lesson 4 (pages): the learner drives a SMALL private block pool on the real model.

Not the shared server: a few blocks, so every one is visible. Each action (start, add, step,
finish, share a prefix, fill until a preemption) returns a frozen `DemoView`. Greedy throughout.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..config import LIMITS, Settings
from ..errors import RequestTooLargeError
from ..paged_batch import PagedBatch, PoolStats
from ..timing import stopwatch
from ..tokens import prompt_ids

SYSTEM = "You are a helpful assistant. Answer briefly."
FILL_QUESTIONS = ("Name a river.", "Name a bird.", "Name a tree.", "Name a city.")


@dataclass(frozen=True)
class DemoRequest:
    rid: int
    prompt_tokens: int
    generated_tokens: int
    text: str  # the answer so far
    state: str  # "running", "waiting (preempted)" or "finished"


@dataclass(frozen=True)
class DemoView:
    pool: PoolStats
    requests: tuple[DemoRequest, ...]
    note: str  # what the last action did, in a sentence
    seconds: float = 0.0  # the last forward pass, device synced (0 when none ran)


@dataclass
class DemoPool:
    """The learner's pool between clicks (kept in the handler's per-visitor state)."""

    batch: PagedBatch
    prompts: dict[int, list[int]] = field(default_factory=dict)
    generated: dict[int, list[int]] = field(default_factory=dict)
    waiting: list[int] = field(default_factory=list)  # preempted, oldest first
    finished: set[int] = field(default_factory=set)
    next_rid: int = 0


def view(lm, demo: DemoPool, note: str, seconds: float = 0.0) -> DemoView:
    reqs = []
    for rid, prompt in demo.prompts.items():
        state = ("finished" if rid in demo.finished else
                 "waiting (preempted)" if rid in demo.waiting else "running")
        gen = demo.generated[rid]
        reqs.append(DemoRequest(rid, len(prompt), len(gen),
                                lm.tokenizer.decode(gen, skip_special_tokens=True), state))
    return DemoView(demo.batch.stats(), tuple(reqs), note, seconds)


def start_pool(lm, blocks: int | None = None, settings: Settings = LIMITS
               ) -> tuple[DemoPool, DemoView]:
    n = settings.paged_demo_blocks.default if blocks is None else blocks
    settings.paged_demo_blocks.check("Blocks in the pool", n)
    demo = DemoPool(PagedBatch(lm, int(n), settings.paged_demo_block_tokens))
    return demo, view(lm, demo, f"An empty pool of {int(n)} blocks of "
                                f"{settings.paged_demo_block_tokens} tokens.")


def _run(lm, demo: DemoPool, rids: list[int], decode: bool = False) -> float:
    """Seconds of one pass for `rids` (pending tokens, or a decode step); appends greedy tokens."""
    with stopwatch(lm.device) as t:  # logits: [N, V]
        logits = demo.batch.feed({r: 1 if decode else demo.batch.rows[r].pending for r in rids})
    for rid, token in zip(rids, logits.argmax(-1).tolist()):
        demo.generated[rid].append(token)
        demo.batch.append(rid, token)
    return t[0]


def _admit(demo: DemoPool, rid: int) -> bool:
    return demo.batch.admit(rid, demo.prompts[rid] + demo.generated[rid])


def add_request(lm, demo: DemoPool, text: str, system: str = SYSTEM) -> DemoView:
    """Admit one prompt (its cached prefix mapped) and prefill it."""
    ids = prompt_ids(lm.tokenizer, text, system=system)
    if not demo.batch.fits_ever(len(ids) + 1):
        raise RequestTooLargeError(
            f"This prompt is {len(ids)} tokens: more than the whole pool holds "
            f"({demo.batch.pool.num_blocks} blocks of {demo.batch.block_tokens}). "
            f"Start a bigger pool or type a shorter prompt.")
    rid, demo.next_rid = demo.next_rid, demo.next_rid + 1
    demo.prompts[rid], demo.generated[rid] = ids, []
    if not _admit(demo, rid):
        demo.waiting.append(rid)
        return view(lm, demo, f"Request {rid} waits: its {len(ids)} tokens need blocks "
                              f"the pool does not have free.")
    hit = demo.batch.rows[rid].prefix_hit_tokens
    seconds = _run(lm, demo, [rid])
    table = demo.batch.pool.tables[rid]
    return view(lm, demo, f"Request {rid}: {len(ids)} prompt tokens in {len(table)} blocks "
                          f"{table}; {hit} of them mapped from cached blocks, "
                          f"{len(ids) - hit} prefilled.", seconds)


def step_pool(lm, demo: DemoPool) -> DemoView:
    """Resume waiting requests that fit, take blocks (preempting the newest when none is
    left), then one decode step for every running request."""
    notes, seconds = [], 0.0
    resumed = [rid for rid in list(demo.waiting) if _admit(demo, rid)]
    demo.waiting = [rid for rid in demo.waiting if rid not in resumed]
    if resumed:
        seconds += _run(lm, demo, resumed)  # prompt + answer so far, computed again
        notes.append(f"request(s) {resumed} resumed: their tokens were prefilled again")
    for rid in demo.batch.make_room():
        demo.waiting.insert(0, rid)
        notes.append(f"request {rid} preempted: the pool had no free block, its blocks went "
                     f"back and it waits at the front of the queue")
    if demo.batch.rows:
        seconds += _run(lm, demo, list(demo.batch.rows), decode=True)  # every row decodes
        notes.append(f"one decode step for {len(demo.batch.rows)} request(s)")
    for rid in [r for r in demo.batch.rows if demo.generated[r][-1] in lm.stop_ids]:
        demo.batch.release(rid)  # it ended its turn: its blocks go back
        demo.finished.add(rid)
        notes.append(f"request {rid} ended its answer and gave its blocks back")
    return view(lm, demo, "; ".join(notes).capitalize() + "." if notes else "Nothing to run.",
                seconds)


def finish(lm, demo: DemoPool, rid: int | None = None) -> DemoView:
    """End a running request (the oldest by default): its blocks go back to the pool."""
    running = list(demo.batch.rows)
    if not running:
        return view(lm, demo, "No request is running.")
    rid = running[0] if rid is None else rid
    table = list(demo.batch.pool.tables[rid])
    demo.batch.release(rid)
    demo.finished.add(rid)
    idle = set(demo.batch.pool.idle)
    kept = [b for b in table if b in idle]
    return view(lm, demo, f"Request {rid} finished: its {len(table)} blocks went back; "
                          f"{len(kept)} full one(s) stay cached for their prefix {kept}, the "
                          f"others are free or still held by another request.")


def add_shared_prefix(lm, demo: DemoPool, prefix: str, first: str, second: str) -> DemoView:
    """Two prompts with one system prefix: the second maps the first's full prefix blocks."""
    add_request(lm, demo, first, system=prefix)
    out = add_request(lm, demo, second, system=prefix)
    return view(lm, demo, out.note + f" Shared blocks now: {demo.batch.stats().blocks_shared}.",
                out.seconds)


def fill_pool(lm, demo: DemoPool, max_steps: int = 64) -> DemoView:
    """Add short requests while they fit, then step until a preemption happens."""
    start = demo.batch.preemptions
    for q in FILL_QUESTIONS:
        if demo.batch.pool.available() <= 1:
            break
        add_request(lm, demo, q)
    last = view(lm, demo, "")
    for _ in range(max_steps):
        if demo.batch.preemptions > start or not demo.batch.rows:
            break
        last = step_pool(lm, demo)
    if demo.batch.preemptions > start:
        return view(lm, demo, "The pool filled up. " + last.note, last.seconds)
    return view(lm, demo, f"No preemption within {max_steps} steps: the pool still had room.",
                last.seconds)
