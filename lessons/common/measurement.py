"""One heavy measurement (a race, a sweep, a comparison), declared once beside its handler: its
endpoint, its handler (a generator of frames) and its work, from the handler's arguments. Each
run is held to the work budget (`over_budget`), the busy check (`watched`) and its time limit
(`timed`), and waits its turn in the measurement line (`MeasureLine`); a short timed run in its
own `lane` has no budget and is never shared. `measurement_wiring.py` wires it to its button.
"""
from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from inference.config import Settings
from inference.experiments import noise

from .prompt_input import encode_prompt

HEAVY = "heavy"  # the concurrency lane of every measurement
clock = time.monotonic  # the time limit's clock (seconds; a test may step it)

TIME_UP = ("⏱ **Stopped at this measurement's time limit ({s:.0f} s)**, so others waiting get "
           "their turn. What it measured so far is below; fewer tokens or sizes fit the limit.")
SMALLER = ("📏 **The line is long, so this run measures {what}**: its class-sized version, so "
           "everyone waiting gets a result sooner; press again on a short line for the full one.")
OVER_BUDGET = ("This measurement would feed about {work:,} tokens through the model (tokens × "
               "passes, all passes together); one measurement may feed at most {budget:,}. Use "
               "fewer new tokens, a shorter prompt or fewer sizes.")


@dataclass(frozen=True)
class Measurement:
    """One heavy measurement: its endpoint, its handler and its work."""

    name: str  # the endpoint (api_name)
    run: Callable[..., Iterator]  # the handler: a generator of frames ({component: value})
    work: Callable[..., int] | None  # tokens fed through the model, from the handler's
    # arguments (None only outside the heavy lane)
    budget: int | None = None  # its own work budget, where its page offers more than Settings'
    limit: str = "measure"  # Gradio's hard time limit: Settings.<limit>_time_limit_s
    lane: str = HEAVY  # its concurrency lane
    # its class-sized variant: handler's arguments -> (smaller arguments, "8 steps, not 24")
    smaller: Callable[..., tuple[tuple, str]] | None = None
    label: str = ""  # what the line calls it ("KV race"); its name's words when empty

    @property
    def title(self) -> str:
        return self.label or self.name.replace("_", " ")

    def __post_init__(self) -> None:
        if self.lane == HEAVY and self.work is None:
            raise ValueError(f"{self.name}: a heavy measurement says its work")

    def over_budget(self, settings: Settings, *args) -> str | None:
        """The refusal sentence when these arguments' work is over budget, else None."""
        if self.work is None:
            return None
        budget = self.budget or settings.measure_work_tokens
        tokens = int(self.work(*args))
        return OVER_BUDGET.format(work=tokens, budget=budget) if tokens > budget else None


def shrunk(n, low: float, share: int) -> int:
    """A class-sized count: `n` over `share`, at least `low` (and never more than `n`).

    >>> shrunk(24, 4, 3), shrunk(6, 4, 3), shrunk(3, 4, 3)
    (8, 4, 3)
    """
    return min(int(n), max(int(low), int(n) // share))


def prompt_tokens(lm, settings: Settings, text, max_tokens: int | None = None) -> int:
    """A typed prompt's tokens as the lessons feed it (chat template included)."""
    return len(encode_prompt(lm, settings, str(text), max_tokens))


@dataclass
class Outcome:
    """What one run came to (the shared-run rule reads it)."""

    cut: bool = False  # stopped at its time limit
    readings: list = field(default_factory=list)  # the noise rule's `Noise` readings

    @property
    def busy(self) -> bool:
        return any(r.busy for r in self.readings)


_END = object()


def watched(frames: Iterator, device, outcome: Outcome) -> Iterator:
    """`frames` under the noise rule: each step runs with the watch open (on the thread that
    asks for it), so the handler's `noise.reading(...)` ends it; readings go to `outcome`."""
    measured = noise.Watching(device, noise.begin(device), outcome.readings)
    try:
        while True:
            with noise.watching(measured):
                frame = next(frames, _END)
            if frame is _END:
                return
            yield frame
    finally:
        getattr(frames, "close", lambda: None)()


def timed(frames: Iterator, limit_s: float, annotate: Callable, outcome: Outcome) -> Iterator:
    """`frames` until `limit_s` has passed, checked after each; then the run is closed, marked
    cut, and its last outputs shown under TIME_UP (`annotate(frame, sentence)`)."""
    begun, merged = clock(), None
    try:
        for frame in frames:
            merged = {**merged, **frame} if isinstance(frame, dict) and isinstance(
                merged, dict) else frame
            yield frame
            if clock() - begun > limit_s:
                frames.close()
                outcome.cut = True
                yield annotate(merged, TIME_UP.format(s=limit_s))
                return
    finally:
        frames.close()


class LineFull(Exception):
    """The line is full: `retry_s` is when the first place should free (None: no estimate),
    `when` says it ("in about 20 s")."""

    def __init__(self, waiting: int, retry_s: float | None) -> None:
        super().__init__(f"{waiting} waiting")
        self.waiting, self.retry_s = waiting, retry_s
        self.when = ("in " + estimate(retry_s) if retry_s is not None
                     else "when the measurement running now has finished")


@dataclass(eq=False)
class Ticket:
    title: str  # what it measures, as the line names it ("KV race")
    work: int  # tokens × passes its run will feed (its class-sized variant's when small)
    number: int  # arrival order
    small: bool = False  # joined past `class_line` waiting: runs its class-sized variant
    started: float | None = None  # the line's clock when its run began (None: waiting)


@dataclass(frozen=True)
class Place:
    position: int  # 1 = next to run; 0 = running now
    wait_s: float | None  # seconds until it starts, estimated; None: no rate known yet
    after: str | None  # the title of the measurement just ahead of it
    ahead_running: bool  # that measurement is the one measuring now
    untimed: str | None = None  # a title ahead with no rate here yet (why no figure)

    def sentence(self) -> str:
        if self.position == 0:
            return "measuring now"
        first = "next" if self.position == 1 else ordinal(self.position)
        where = f"{first} in line, {estimate(self.wait_s, self.untimed)}"
        if self.after is None:
            return where
        if self.ahead_running:
            return f"{where}: it starts when the {self.after} measuring now ends"
        return f"{where}: it starts after the {self.after} pressed before it"


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def estimate(wait_s: float | None, untimed: str | None = None) -> str:
    if wait_s is None:
        why = f" (the {untimed} has not run on this machine yet)" if untimed else ""
        return f"no time estimate yet{why}"
    if wait_s < 90:
        return f"about {max(5, round(wait_s / 5) * 5):.0f} s"
    return f"about {round(wait_s / 60):.0f} min"


@dataclass
class MeasureLine:
    """The measurement line: a press that cannot run now waits first come, first served, told
    its place and an honest wait (the work ahead times this machine's rate for each measurement,
    from its latest whole run), or that there is none yet. Past `class_line` waiting a newcomer
    runs small (`Ticket.small`); past `bound` it is refused. One line per app.

    >>> t = [0.0]
    >>> line = MeasureLine(slots=1, bound=8, class_line=4, clock=lambda: t[0])
    >>> a, b, c = (line.join("KV race", 100) for _ in range(3))
    >>> line.admit(a), line.admit(b)
    (True, False)
    >>> line.place(c).sentence().split(":")[0]
    '2nd in line, no time estimate yet (the KV race has not run on this machine yet)'
    >>> t[0] = 20.0; line.done(a, whole=True)  # 100 tokens in 20 s: 0.2 s a token
    >>> line.admit(b), line.place(c).sentence()
    (True, 'next in line, about 20 s: it starts when the KV race measuring now ends')
    """

    slots: int = 1  # measurements running at once (Settings.heavy_lane_limit)
    bound: int = 24  # presses waiting at once; the next is refused (Settings.measure_line)
    class_line: int = 4  # past this many waiting, a newcomer runs small (Settings.class_line)
    limit_s: float = 240.0  # a run's time limit: no run counts for longer in an estimate
    update_s: float = 1.0  # a waiting press's place is refreshed this often
    clock: Callable[[], float] = time.monotonic
    rates: dict[str, float] = field(default_factory=dict)  # title -> s per work unit, latest
    _tickets: list[Ticket] = field(default_factory=list)  # running first, then by arrival
    _numbers: Iterator[int] = field(default_factory=itertools.count)
    _cond: threading.Condition = field(default_factory=threading.Condition)

    @classmethod
    def of(cls, settings: Settings) -> MeasureLine:
        return cls(slots=settings.heavy_lane_limit, bound=settings.measure_line,
                   class_line=settings.class_line, limit_s=settings.measure_limit_s,
                   update_s=settings.line_update_s)

    def __len__(self) -> int:  # presses in the line, waiting or running
        with self._cond:
            return len(self._tickets)

    def waiting(self) -> int:
        with self._cond:
            return sum(t.started is None for t in self._tickets)

    def join(self, title: str, work: int, small_work: int | None = None) -> Ticket:
        """A place at the end of the line (`small_work`: its class-sized variant's, run when
        the line is long). Raises LineFull past `bound` waiting."""
        with self._cond:
            waiting = sum(t.started is None for t in self._tickets)
            if waiting >= self.bound:
                raise LineFull(waiting, self._first_free_s())
            small = small_work is not None and waiting >= self.class_line
            ticket = Ticket(title, int(small_work if small else work), next(self._numbers),
                            small)
            self._tickets.append(ticket)
            self._cond.notify_all()
            return ticket

    def admit(self, ticket: Ticket) -> bool:
        """Start `ticket`'s run if a slot is free and no one waiting arrived before it."""
        with self._cond:
            if ticket.started is not None:
                return True
            running = sum(t.started is not None for t in self._tickets)
            first = next((t for t in self._tickets if t.started is None), None)
            if running < self.slots and first is ticket:
                ticket.started = self.clock()
                self._cond.notify_all()
                return True
            return False

    def done(self, ticket: Ticket, whole: bool = False) -> None:
        """`ticket` leaves the line; a whole run (not cut, stopped or failed) times it."""
        with self._cond:
            if ticket in self._tickets:
                self._tickets.remove(ticket)
            if whole and ticket.started is not None and ticket.work > 0:
                self.rates[ticket.title] = (self.clock() - ticket.started) / ticket.work
            self._cond.notify_all()

    def place(self, ticket: Ticket) -> Place:
        with self._cond:
            if ticket.started is not None:
                return Place(0, 0.0, None, False)
            ahead = [t for t in self._tickets if t is not ticket and (
                t.started is not None or t.number < ticket.number)]
            position = sum(t.started is None for t in ahead) + 1
            costs = [self._cost(t) for t in ahead]
            untimed = next((t.title for t, c in zip(ahead, costs) if c is None), None)
            # with several slots, the wait is the work ahead shared among them
            wait = None if untimed else sum(costs) / self.slots
            last = max(ahead, key=lambda t: (t.started is None, t.number), default=None)
            return Place(position, wait, last.title if last else None,
                         last is not None and last.started is not None, untimed)

    def turn(self, ticket: Ticket) -> Iterator[Place]:
        """`ticket`'s place, at once and then every `update_s` or when the line moves, until
        its run has begun."""
        while not self.admit(ticket):
            yield self.place(ticket)
            with self._cond:
                self._cond.wait(timeout=self.update_s)

    def _cost(self, t: Ticket) -> float | None:
        """Seconds `t` still needs (at most the time limit), or None with no rate here."""
        rate = self.rates.get(t.title)
        if rate is None:
            return None
        total = min(t.work * rate, self.limit_s)
        return total if t.started is None else max(0.0, total - (self.clock() - t.started))

    def _first_free_s(self) -> float | None:
        running = [self._cost(t) for t in self._tickets if t.started is not None]
        return None if any(c is None for c in running) else min(running, default=0.0)
