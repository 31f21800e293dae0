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
- Identical requests share one run (`classroom.shared_runs`), and every pass takes turns with
  the server that answers the class's chats (`feedback.guarded(alone=...)`).

No Gradio here: the wiring is `measurement_wiring`.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from inference.config import Settings

from .prompt_input import encode_prompt

HEAVY = "heavy"  # the concurrency lane of every measurement
clock = time.monotonic  # the time limit's clock (seconds; a test may step it)

TIME_UP = ("⏱ **Stopped at this measurement's time limit ({s:.0f} s)**, so the others waiting "
           "could have their turn. What it measured so far is below; fewer tokens or fewer "
           "sizes fit in the limit.")
OVER_BUDGET = ("This measurement would feed about {work:,} tokens through the model (tokens × "
               "passes, all passes together); one measurement may feed at most {budget:,}. Use "
               "fewer new tokens, a shorter prompt or fewer sizes.")


@dataclass(frozen=True)
class Measurement:
    """One heavy measurement: its endpoint, its handler and its work."""

    name: str  # the endpoint (api_name)
    run: Callable[..., Iterator]  # the handler: a generator of frames ({component: value})
    work: Callable[..., int]  # tokens fed through the model, from the handler's own arguments
    budget: int | None = None  # its own work budget, where its page offers more than Settings'
    limit: str = "measure"  # Gradio's hard time limit: Settings.<limit>_time_limit_s

    def over_budget(self, settings: Settings, *args) -> str | None:
        """The refusal sentence when a run with these arguments would feed more tokens than
        its budget, else None (an error in the arguments is the handler's to word: raised)."""
        budget = self.budget or settings.measure_work_tokens
        tokens = int(self.work(*args))
        return OVER_BUDGET.format(work=tokens, budget=budget) if tokens > budget else None


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
