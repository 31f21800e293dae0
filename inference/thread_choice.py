"""How many CPU threads a server pass should use: decided by timing the passes, not assumed.

When another program holds a core, every matrix product split across all cores waits for its
slowest thread. So `ThreadChoice` keeps, per kind and size of pass, the newest seconds per token
at each count tried, runs the fastest (another than the default only when `margin` faster) and
tries the others again now and then, backing off while they lose. The tokens are the same at
any count. `fastest_threads` makes the same choice once for a lesson measurement.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from .timing import stopwatch


@dataclass(frozen=True)
class ThreadFigure:
    """What the server view shows: one shape's newest seconds per token at one count."""

    kind: str  # "decode" or "prefill"
    tokens: int  # the shape: passes of `tokens` up to 2 × tokens - 1 tokens
    threads: int
    seconds_per_token: float
    chosen: bool  # the count this shape's passes use now


@dataclass
class _Shape:
    per_token: dict[int, float] = field(default_factory=dict)  # threads -> newest s/token
    since: dict[int, int] = field(default_factory=dict)  # threads -> passes since last used
    wait: dict[int, int] = field(default_factory=dict)  # threads -> passes before a new try


class ThreadChoice:
    """Chooses each server pass's thread count from the passes timed so far."""

    def __init__(self, counts: tuple[int, ...], probe_every: int = 8, probe_max: int = 256,
                 blend: float = 0.3, margin: float = 1.25) -> None:
        self.counts = tuple(dict.fromkeys(c for c in counts if c >= 1))  # the default first
        self.probe_every, self.probe_max, self.blend = probe_every, probe_max, blend
        self.margin = margin  # how much faster than the default another count must be
        self._shapes: dict[tuple[str, int], _Shape] = {}

    @staticmethod
    def for_device(device: torch.device | str, fixed: int = 0) -> ThreadChoice | None:
        """On a CPU: the default count, its half and 1 (or only `fixed`); on a GPU, None."""
        if torch.device(device).type != "cpu":
            return None
        n = torch.get_num_threads()
        return ThreadChoice((fixed,) if fixed else (n, max(1, n // 2), 1))

    def _shape(self, kind: str, tokens: int) -> _Shape:
        """The passes of this kind and size (tokens, by powers of two)."""
        return self._shapes.setdefault((kind, 1 << (max(tokens, 1).bit_length() - 1)), _Shape())

    def choose(self, kind: str, tokens: int) -> int:
        """One never tried, else a try that is due, else the fastest so far."""
        shape = self._shape(kind, tokens)
        for c in self.counts:
            if c not in shape.per_token:
                return c
        best = self._best(shape)
        for c in self.counts:
            if c != best and shape.since.get(c, 0) >= shape.wait.get(c, self.probe_every):
                return c
        return best

    def _best(self, shape: _Shape) -> int:
        """The fastest count; another count than the default must beat it by `margin`."""
        default = self.counts[0]
        fastest = min(shape.per_token, key=shape.per_token.__getitem__)
        if default in shape.per_token and fastest != default and (
                shape.per_token[fastest] * self.margin > shape.per_token[default]):
            return default
        return fastest

    def record(self, kind: str, tokens: int, threads: int, seconds: float) -> None:
        shape = self._shape(kind, tokens)
        per_token = seconds / max(tokens, 1)
        best_before = self._best(shape) if shape.per_token else threads
        if threads in shape.per_token and shape.since.get(threads, 0) == 0:  # in use: blend
            per_token = (1 - self.blend) * shape.per_token[threads] + self.blend * per_token
        shape.per_token[threads] = per_token
        for c in shape.per_token:
            shape.since[c] = 0 if c == threads else shape.since.get(c, 0) + 1
        if threads != best_before:  # a try: wait longer before the next if it lost
            won = self._best(shape) == threads
            shape.wait[threads] = (self.probe_every if won else
                                   min(2 * shape.wait.get(threads, self.probe_every),
                                       self.probe_max))

    def figures(self) -> tuple[ThreadFigure, ...]:
        """Every shape's newest figures, for the server view (largest shapes first)."""
        out = []
        for (kind, tokens), shape in sorted(self._shapes.items(), key=lambda kv: -kv[0][1]):
            if not shape.per_token:
                continue
            best = self._best(shape)
            out += [ThreadFigure(kind, tokens, c, s, c == best)
                    for c, s in sorted(shape.per_token.items(), reverse=True)]
        return tuple(out)


def fastest_threads(run: Callable[[], object], device: torch.device | str,
                    repeats: int = 2, margin: float = 1.25, runs: int = 0) -> int:
    """For a lesson's measurement: time `run` (a short pass like the ones to be measured) at
    the default count and at 1 thread, best of `repeats` each -> 1 when it was `margin`×
    faster, else the default (on a GPU, the default without timing). `runs`: then `run` again
    untimed until it has run that many times (the same warm-up on any machine)."""
    default = torch.get_num_threads()
    best = {}
    if torch.device(device).type == "cpu" and default > 1:
        for count in (default, 1):
            with num_threads(count):
                for _ in range(repeats):
                    with stopwatch(device) as t:
                        run()
                    best[count] = min(best.get(count, t[0]), t[0])
    for _ in range(runs - 2 * repeats * bool(best)):
        run()
    return 1 if best and best[1] * margin < best[default] else default


@contextmanager
def num_threads(count: int) -> Iterator[int]:
    """`with num_threads(1):` run at that many CPU threads, the count restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield count
    finally:
        torch.set_num_threads(before)
