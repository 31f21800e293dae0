"""Predict, then measure, inside the lessons: beside the buttons that run the key
measurements (the prefill sweep, the KV race, the batch sweep, int8 against float32, and the
cost of a million tokens) a number box asks for a guess first; the run's final text then
sets the guess beside what it measured, with one sentence of why.

The unit and the "why" are the presenter's (`assets/presenter.md`, the screen with the same
measurement key), so the lesson and the projected screen never explain it two ways. The box
itself is `controls.guess_box`; this file is plain (handlers call `guess_md`).
"""
from __future__ import annotations

from functools import cache

from .predictions import beside_noisy_md, comparison_md, fmt, plain_unit
from .presenter_screens import Screen, load_screens


@cache
def question(key: str) -> Screen:
    """The presenter screen that asks about measurement `key` (its `predict`, `unit`, `why`)."""
    screen = next((s for s in load_screens() if s.measure == key), None)
    if screen is None or screen.predict is None:
        raise KeyError(f"no presenter screen asks for a guess about {key!r}")
    return screen


def guess_md(key: str, guess: float | None, measured: float, noisy: bool = False) -> str:
    """The guess beside this run's measurement, and why it came out so (0, an empty box,
    reads as "no guess typed": `comparison_md`). `noisy`: the machine was busy while measuring
    (inference/experiments/noise.py): the guess is set beside the number, with no verdict."""
    q = question(key)
    if noisy:
        return "\n\n---\n**Predict, then measure.** " + beside_noisy_md(
            guess, q.unit, f"{fmt(measured)} {plain_unit(q.unit)}")
    return "\n\n---\n**Predict, then measure.** " + comparison_md(guess, measured,
                                                                  q.unit.strip(), q.why)
