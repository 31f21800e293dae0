"""One heavy measurement (a race, a sweep, a comparison), declared once beside its handler.

A `Measurement` says what runs and what it costs: its endpoint's name, the handler (a generator
of frames), and its work, a function of the same arguments the handler gets that calls the work
formula living beside the experiment loop it counts (`inference.experiments.*`:
`race_tokens`, `batch_sweep_tokens`, ...). `measurement_wiring.wire_measurement` is the only way
a heavy button is wired; it reads everything else from `Settings`:

- **Work budget** (`measure_work_tokens`, or the measurement's own `budget` where its page
  offers more): a run whose arguments would feed more tokens through the model (tokens ×
  passes, all passes together) is refused with `OVER_BUDGET` before any pass, when it joins
  the queue (`classroom.classroom_guard`) and again as it starts (the one error path).
- **Time limit** (`measure_limit_s`): a run still going stops at its next frame, frees the lane
  and shows what it measured so far under `TIME_UP` (`timed`); Gradio's own hard limit is
  `Settings.<limit>_time_limit_s`.
- **Busy check**: the noise rule watches every run (`watched`: `noise.begin` before its first
  step, the watch open while each step runs); the handler takes its reading where it has its
  repeats (`noise.reading`) and shows it; the run's `Outcome` keeps every reading.
- Identical requests share one run (`classroom.shared_runs`, deciding from the `Outcome`: a
  run cut short or measured on a busy machine is not shown again), and every pass takes turns
  with the server that answers the class's chats (`feedback.guarded(alone=...)`).
- **The line** (`lessons.common.measure_line`): a press that cannot run now waits in a first-come
  line, told its place and a wait estimated from its `work` and this machine's rate; past
  `Settings.class_line` waiting, it runs its class-sized variant (`smaller`: the same
  measurement at fewer points or tokens, and what changed, said on screen).

A short timed model run outside the heavy lane (one prefill, the cache growing) is a
measurement too, in its own `lane`, for its busy check: no work budget, never shared.

No Gradio here: the wiring is `measurement_wiring`.
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from inference.config import Settings
from inference.experiments import noise

from .prompt_input import encode_prompt

HEAVY = "heavy"  # the concurrency lane of every measurement
clock = time.monotonic  # the time limit's clock (seconds; a test may step it)

TIME_UP = ("⏱ **Stopped at this measurement's time limit ({s:.0f} s)**, so the others waiting "
           "could have their turn. What it measured so far is below; fewer tokens or fewer "
           "sizes fit in the limit.")
SMALLER = ("📏 **The line is long, so this run measures {what}** (its class-sized version, so "
           "everyone waiting gets a result sooner; press again when the line is short for the "
           "full one).")
OVER_BUDGET = ("This measurement would feed about {work:,} tokens through the model (tokens × "
               "passes, all passes together); one measurement may feed at most {budget:,}. Use "
               "fewer new tokens, a shorter prompt or fewer sizes.")


@dataclass(frozen=True)
class Measurement:
    """One heavy measurement: its endpoint, its handler and its work."""

    name: str  # the endpoint (api_name)
    run: Callable[..., Iterator]  # the handler: a generator of frames ({component: value})
    work: Callable[..., int] | None  # tokens fed through the model, from the handler's own
    # arguments (None only outside the heavy lane)
    budget: int | None = None  # its own work budget, where its page offers more than Settings'
    limit: str = "measure"  # Gradio's hard time limit: Settings.<limit>_time_limit_s
    lane: str = HEAVY  # its concurrency lane
    # its class-sized variant, from the handler's arguments: (the arguments of a smaller run of
    # the same measurement, what changed: "8 steps, not 24"); None: it has none
    smaller: Callable[..., tuple[tuple, str]] | None = None
    label: str = ""  # what the line calls it ("KV race"); its name's words when empty

    @property
    def title(self) -> str:
        return self.label or self.name.replace("_", " ")

    def __post_init__(self) -> None:
        if self.lane == HEAVY and self.work is None:
            raise ValueError(f"{self.name}: a heavy measurement says its work")

    def over_budget(self, settings: Settings, *args) -> str | None:
        """The refusal sentence when a run with these arguments would feed more tokens than
        its budget, else None (an error in the arguments is the handler's to word: raised)."""
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


def measurement_of(block_fn) -> Measurement | None:
    """The measurement a wired event runs (`measurement_wiring.measured` marks it), or None."""
    return getattr(getattr(block_fn, "fn", None), "measurement", None)


def prompt_tokens(lm, settings: Settings, text, max_tokens: int | None = None) -> int:
    """A typed prompt's tokens as the lessons feed it (chat template included)."""
    return len(encode_prompt(lm, settings, str(text), max_tokens))


@dataclass
class Outcome:
    """What one run came to, as its wrapper saw it (the shared-run rule reads this)."""

    cut: bool = False  # stopped at its time limit
    readings: list = field(default_factory=list)  # the noise rule's `Noise` readings

    @property
    def busy(self) -> bool:
        return any(r.busy for r in self.readings)


_END = object()


@contextlib.contextmanager
def measuring(device) -> Iterator[Outcome]:
    """A block run as one measurement on this thread (a handler called on its own): the watch
    open throughout, its readings in the `Outcome`."""
    outcome = Outcome()
    with noise.watching(noise.Watching(device, noise.begin(device), outcome.readings)):
        yield outcome


def watched(frames: Iterator, device, outcome: Outcome) -> Iterator:
    """`frames` under the noise rule: its readings before the first step, then each step run
    with this watch open, so the handler's `noise.reading(...)` ends it; every reading is kept
    in `outcome.readings`. Each step runs on the thread that asks for it (the compute thread)."""
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
    """`frames` until `limit_s` has passed, checked after each one; then stop the run (it
    frees the lane and the compute thread), mark it cut and show its last outputs under
    TIME_UP (`annotate(frame, sentence)`)."""
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
