"""Identical heavy measurements run once: the rule for every lesson's sweep, race and comparison.

A class pressing the same button at once should not queue thirty copies of one 30-second race.
A heavy measurement is named by its key: the event (which lesson's button) and the settings the
visitor sent. The first visitor to ask for a key *reserves* its run the moment their event joins
the queue (`reserve`), even while it waits in the measurement line behind other lessons' runs.
A second visitor asking for the same key while that run is reserved or measuring *follows* it:
they are told it is waiting for its turn (`WAITING`), then see "this is already being measured
for another visitor" and the same frames as they come, instead of waiting in line to repeat it.
A run that finished a moment ago (`reuse_s`) is shown again to whoever asks for it, labelled as
measured for another visitor.

A leader may first wait in the measurement line (`lessons.common.measurement.MeasureLine`,
the `queue` given to `run`): its handler has started, but its run has not. Its followers are
told where that run stands (`IN_LINE`, refreshed as the line moves), and a follower never
waits in the line itself.

A reserved run whose leader never starts (its event left the queue: the tab closed, Stop, a
refusal) ends for its followers with `LEFT` (press again to measure yourself); they check at
each 1 s wake-up with `in_queue`, which `classroom.classroom_guard` points at Gradio's
queue. The next visitor asking for that key reserves a run of their own.

What is never reused: a run measured while the machine was busy (a `Noise` reading of its
`outcome` says busy), a run cut short (stopped, over its time limit), a failed run.
Those are shown to the visitors who followed them while they waited or ran, and to no one
after, with one exception for a busy run: a visitor who ASKED while it was waiting in line or
measuring (their event joined the queue before it ended, but their handler started only after:
the worker threads were all taken) gets its result, busy notice and all, instead of measuring
the same thing again in a busy room.

The key (`run_key`: the measurement and the arguments its handler gets) is given to an event
when it joins the queue (`tag`, see `classroom.classroom_guard`) and read back by its handler
(`run`, through `event_id`), so the decision to lead or follow, made before the event waits
anywhere, and the run it leads or follows are the same: the leader's handler starts the run
it reserved (`share(..., event_id=...)`). Whether a run may be shown again is read from its
`outcome` (cut short at its time limit, measured on a busy machine), as its wrapper recorded it
(`lessons.common.measurement.Outcome`).

>>> runs = SharedRuns(reuse_s=60)
>>> key = run_key("kv_race", ["Why?", 48])
>>> list(runs.share(key, lambda: iter([{"a": 1}, {"b": 2}]), lambda f, s: f))
[{'a': 1}, {'b': 2}]
>>> list(runs.share(key, lambda: iter([{"a": 9}]), lambda f, s: f))  # reused: merged, no run
[{'a': 1, 'b': 2}]
>>> runs.leads
1
"""
from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from lessons.common.measurement import MeasureLine

WAITING = ("⏳ **Another visitor asked for this same measurement a moment ago: it is waiting for "
           "its turn in the measurement line, and its result will appear here.** (Same lesson, "
           "same settings: one run for both of you.)")
FOLLOWING = ("⏳ **This is already being measured for another visitor: its result will appear "
             "here.** (Same lesson, same settings: one run for both of you.)")
SHARED_NOW = "*Measured just now for another visitor with the same settings (one shared run).*"
SHARED_EARLIER = ("*Measured {s:.0f} s ago on this machine for another visitor with the same "
                  "settings (one shared run); change a setting to measure afresh.*")
IN_LINE = ("⏳ **This shares a run already in line, waiting for its turn: {where}.** Another "
           "visitor asked for this same measurement a moment ago; its result will appear here "
           "(same lesson, same settings: one run for both of you).")
LEFT = ("The run you were following ended before its result (the visitor who started it "
        "stopped it): press the button again to measure it yourself.")

Annotate = Callable[[object, str], object]  # (frame, sentence) -> the frame showing it
# a leader's wait in the measurement line: given how to tell its followers where the run
# stands, its frames until the run may start
Queue = Callable[[Callable[[str], None]], Iterator]


def run_key(name: str, values: list) -> tuple:
    """The key of a heavy run: the measurement and the arguments its handler gets (a digest)."""
    return name, hashlib.sha256(repr(values).encode()).hexdigest()


@dataclass
class Run:
    """One measurement in progress or just finished, as its followers see it."""

    merged: object = None  # every output's latest value ({component: value}), or the last tuple
    version: int = 0  # frames seen so far
    done: bool = False
    error: BaseException | None = None
    left: bool = False  # the leader stopped (Stop, closed tab) before the end
    finished_at: float = 0.0  # time.monotonic() when it ended, s
    whole: bool = False  # finished with a result, neither failed, stopped nor time-cut
    reusable: bool = False  # whole and quiet: may be shown to later visitors
    leader: str | None = None  # the leading event's id while it waits in line, not yet started
    outcome: object = None  # the leader's wrapper's `Outcome` (cut short, busy), read at the end
    watchers: int = 0  # followers watching it now
    orphan: Iterator | None = None  # its passage, left by a leader who left, for a follower
    line: str | None = None  # where it stands in the measurement line, while its leader waits
    notes: int = 0  # changes of `line` so far
    cond: threading.Condition = field(default_factory=threading.Condition)  # an RLock inside

    def start(self) -> None:
        """The leader's handler has begun: no longer a reservation (it may still wait in line;
        its followers learn where: `note`)."""
        with self.cond:
            self.leader = None
            self.cond.notify_all()

    def note(self, where: str | None) -> None:
        """Where the run stands in the measurement line, for its followers (None: out of it)."""
        with self.cond:
            if where != self.line:
                self.line, self.notes = where, self.notes + 1
                self.cond.notify_all()

    def hand_over(self, passage: Iterator) -> bool:
        """Its driver left: give `passage` to a follower watching it, if any (True)."""
        with self.cond:
            if self.watchers == 0 or self.done:
                return False
            self.orphan = passage
            self.cond.notify_all()
            return True

    def add(self, frame: object) -> None:
        with self.cond:
            if isinstance(frame, dict) and isinstance(self.merged, dict):
                self.merged = {**self.merged, **frame}
            else:
                self.merged = dict(frame) if isinstance(frame, dict) else frame
            self.version += 1
            self.cond.notify_all()

    def end(self, *, error: BaseException | None = None, left: bool = False,
            outcome=None) -> None:
        """The run ended; `outcome` (its wrapper's `Outcome`): cut short, or busy."""
        with self.cond:
            self.done, self.error, self.left = True, error, left
            self.finished_at = time.monotonic()
            self.whole = (error is None and not left and self.version > 0
                          and not getattr(outcome, "cut", False))
            self.reusable = self.whole and not getattr(outcome, "busy", False)
            self.cond.notify_all()


class SharedRuns:
    """Heavy runs by key: reserve one, lead it, follow one reserved or in progress, or reuse
    one just finished."""

    def __init__(self, reuse_s: float, kept: int = 64) -> None:
        self.reuse_s, self.kept = reuse_s, kept
        self._lock = threading.Lock()
        self._runs: OrderedDict[tuple, Run] = OrderedDict()  # newest last, at most `kept`
        # event id -> (key, time.monotonic() when it joined the queue), until it runs
        self._tags: OrderedDict[str, tuple[tuple, float]] = OrderedDict()
        # event id -> the run it joined (a follower never leads: it waits in no line), until
        # its handler starts
        self._joined: OrderedDict[str, Run] = OrderedDict()
        self.leads = 0  # measurements actually started (the tests count them)
        # whether an event id is still waiting or running in the queue (classroom_guard sets it
        # to read Gradio's queue; without a queue, a reservation stands until its leader starts)
        self.in_queue: Callable[[str], bool] = lambda event_id: True
        # the id of the event whose handler runs now (classroom_guard reads Gradio's context;
        # without it no event was tagged, and each run is its own)
        self.event_id: Callable[[], str | None] = lambda: None
        self.line: MeasureLine | None = None  # the measurement line (`line_for`)

    def line_for(self, settings) -> MeasureLine:
        """The app's one measurement line, sized by `settings` (made by the first heavy
        button wired)."""
        with self._lock:
            if self.line is None:
                self.line = MeasureLine.of(settings)
            return self.line

    def waiting_visitors(self) -> int:
        """Visitors waiting on measurements now: each press in the line, each follower
        watching a run (the server's turns weigh measurements by it)."""
        pressed = len(self.line) if self.line is not None else 0
        with self._lock:
            return pressed + sum(r.watchers for r in self._runs.values() if not r.done)

    def tag(self, event_id: str, key: tuple) -> None:
        with self._lock:
            self._tags[event_id] = key, time.monotonic()
            while len(self._tags) > 4 * self.kept:  # events that never ran (left the queue)
                self._tags.popitem(last=False)

    def take(self, event_id: str | None) -> tuple[tuple, float] | None:
        """(the event's run key, when it joined the queue), once, or None when untagged."""
        with self._lock:
            return self._tags.pop(event_id, None) if event_id else None

    def join(self, event_id: str, key: tuple) -> None:
        """Remember the reserved, running or fresh run of `key` that event `event_id` follows."""
        with self._lock:
            run = self._runs.get(key)
            if run is not None and (not run.done or self._fresh(run)):
                self._joined[event_id] = run
                while len(self._joined) > 4 * self.kept:
                    self._joined.popitem(last=False)

    def reserve(self, event_id: str, key: tuple) -> None:
        """Hold `key`'s run for the event `event_id`, just admitted to the measurement line: it
        will lead when its turn comes, and identical presses meanwhile follow it."""
        with self._lock:
            run = self._runs.get(key)
            if run is not None:
                self._check_leader(run)
            if run is None or (run.done and not self._fresh(run)):
                self._put(key, Run(leader=event_id))

    def live(self, key: tuple) -> bool:
        """True when a visitor asking for `key` now would follow or reuse, not run."""
        with self._lock:
            run = self._runs.get(key)
            if run is not None:
                self._check_leader(run)  # a stale reservation ends here: the asker leads
            return run is not None and (not run.done or self._fresh(run))

    def _put(self, key: tuple, run: Run) -> Run:
        self._runs[key] = run
        self._runs.move_to_end(key)
        while len(self._runs) > self.kept:
            self._runs.popitem(last=False)
        return run

    def _check_leader(self, run: Run) -> None:
        """End a reserved run whose leader left the queue before its handler began."""
        leader = run.leader
        if leader is None or run.done or self.in_queue(leader):
            return
        with run.cond:
            if run.leader == leader and not run.done:  # not started meanwhile
                run.end(left=True)

    def _fresh(self, run: Run) -> bool:
        return run.reusable and time.monotonic() - run.finished_at <= self.reuse_s

    def run(self, start: Callable[[], Iterator], annotate: Annotate, outcome=None,
            queue: Queue | None = None) -> Iterator:
        """`start()`'s frames, shared with identical requests when this event was tagged as it
        joined the queue, else run alone; a leader first waits in `queue` (its frames are its
        own: followers see where the run stands)."""
        event_id = self.event_id()
        tagged = self.take(event_id)
        if tagged is None:
            if queue is not None:
                yield from queue(lambda where: None)
            yield from start()
            return
        yield from self.share(tagged[0], start, annotate, asked_at=tagged[1],
                              event_id=event_id, outcome=outcome, queue=queue)

    def share(self, key: tuple, start: Callable[[], Iterator], annotate: Annotate,
              asked_at: float | None = None, event_id: str | None = None,
              outcome=None, queue: Queue | None = None) -> Iterator:
        """Lead a run of `start()` (the one event `event_id` reserved, or a new one), follow
        the one it joined (`join`) or one reserved or in progress, or replay the fresh result
        (or a busy one that ended after this visitor asked, `asked_at`: time.monotonic())."""
        with self._lock:
            joined = self._joined.pop(event_id, None) if event_id else None
            if joined is not None:  # follows the run it joined, whatever became of it
                run, lead = joined, False
            else:
                run, lead = self._lead_or_follow(key, asked_at, event_id)
        if lead:
            yield from _lead(run, start, outcome, queue)
        else:
            yield from _follow(run, annotate, self._check_leader)

    def _lead_or_follow(self, key: tuple, asked_at: float | None,
                        event_id: str | None) -> tuple[Run, bool]:
        """(the run to lead or follow, whether to lead it); under `_lock`."""
        run = self._runs.get(key)
        if run is not None:
            self._check_leader(run)
        mine = (run is not None and not run.done and event_id is not None
                and run.leader == event_id)  # the run this event reserved: start it
        asked_during = (run is not None and run.done and run.whole and asked_at is not None
                        and asked_at <= run.finished_at)
        lead = mine or run is None or (run.done and not self._fresh(run) and not asked_during)
        if mine:
            run.start()
        elif lead:
            run = self._put(key, Run())
        if lead:
            self.leads += 1
        return run, lead


class _Waiting:
    """A frame of the leader's wait in line: shown to whoever drives the run, never kept."""

    def __init__(self, frame: object) -> None:
        self.frame = frame


def _passage(run: Run, start: Callable[[], Iterator], queue: Queue | None) -> Iterator:
    """A run's whole passage: its wait in the line (frames marked `_Waiting`), then its own
    frames. One generator, so a follower can take it over where its leader left it."""
    if queue is not None:
        for frame in queue(run.note):
            yield _Waiting(frame)
    run.note(None)  # out of the line: measuring
    yield from start()


def _lead(run: Run, start: Callable[[], Iterator], outcome=None,
          queue: Queue | None = None) -> Iterator:
    run.outcome = outcome
    yield from _drive(run, _passage(run, start, queue), lambda frame: frame)


def _drive(run: Run, passage: Iterator, shown: Callable[[object], object]) -> Iterator:
    """Pull `passage`, keeping the run's frames for its followers and yielding each as
    `shown(...)` it. If this visitor leaves (the generator is closed) while others follow,
    the passage is handed to one of them (`Run.orphan`) instead of stopped: no lost work."""
    handed = False
    try:
        for frame in passage:
            if isinstance(frame, _Waiting):  # a place in line: true for whoever carries it
                yield frame.frame
                continue
            run.add(frame)
            yield shown(frame)
    except GeneratorExit:
        handed = run.hand_over(passage)
        if not handed:
            run.end(left=True)
        raise
    except BaseException as exc:
        run.end(error=exc)
        raise
    else:
        run.end(outcome=run.outcome)
    finally:
        if not handed:
            getattr(passage, "close", lambda: None)()


def _follow(run: Run, annotate: Annotate, check_leader: Callable[[Run], None]) -> Iterator:
    with run.cond:
        run.watchers += 1
    try:
        yield from _watch(run, annotate, check_leader)
    finally:
        with run.cond:
            run.watchers -= 1


def _watch(run: Run, annotate: Annotate, check_leader: Callable[[Run], None]) -> Iterator:
    seen, told = (-1, -1), False
    while True:
        with run.cond:
            while (run.version, run.notes) == seen and not run.done and run.orphan is None:
                run.cond.wait(timeout=1.0)  # woken by each frame; the timeout only re-checks
                check_leader(run)  # a reservation whose leader left the queue ends here
            passage, run.orphan = run.orphan, None
            seen, merged, done, ended = (run.version, run.notes), run.merged, run.done, \
                run.finished_at
            waiting, line = run.leader is not None, run.line
        if passage is not None:  # its leader left: this visitor carries the run on
            yield from _drive(run, passage, lambda frame: annotate(run.merged, FOLLOWING))
            seen = (run.version, run.notes)
            if not run.done:
                continue
            merged, done, ended = run.merged, True, run.finished_at
        if done:
            break
        if merged is not None:
            yield annotate(merged, FOLLOWING)
        elif line is not None:
            yield annotate({}, IN_LINE.format(where=line))
        elif waiting and not told:
            told = True
            yield annotate({}, WAITING)
    if run.error is not None:
        raise run.error
    if run.left or merged is None:
        yield annotate(merged, LEFT) if merged is not None else annotate({}, LEFT)
        return
    ago = time.monotonic() - ended
    yield annotate(merged, SHARED_NOW if ago < 2.0 else SHARED_EARLIER.format(s=ago))
