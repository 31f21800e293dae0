"""One heavy measurement (a race, a sweep, a comparison), declared once beside its handler:
its endpoint, its handler (a generator of frames) and its work, from the handler's arguments by
the formula beside the experiment loop it counts (`race_tokens`, ...). Each run is wrapped in the
work budget (`over_budget`), the busy check (`watched`) and the time limit (`timed`: Gradio's
`time_limit` binds only streams); `measurement_wiring.py` wires it to its button. A short timed
run outside the heavy lane is a measurement in its own `lane`: no budget, never shared.
"""
from __future__ import annotations

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


def measurement_of(block_fn) -> Measurement | None:
    """The measurement a wired event runs (marked by `measured`), or None."""
    return getattr(getattr(block_fn, "fn", None), "measurement", None)


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
