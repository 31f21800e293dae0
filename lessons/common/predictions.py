"""Predict, then measure: the learner commits to a number before the run, then sees their guess
beside the measurement with one sentence of why (a verdict only from a quiet run: this one, or
this machine's quiet reference). A lesson's guess box asks its presenter screen's question.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from inference.experiments.quiet_reference import QuietFigure
from visualizations.cards import ratio_side

from .lesson_text import lesson_text

CLOSE = 1.25  # within this factor either way, a guess counts as close


@dataclass(frozen=True)
class Screen:
    """One idea, in large type, with the one live measurement that shows it."""

    title: str
    body: str  # markdown
    measure: str  # key of the measurement its button runs (lessons.presenter_handlers)
    button: str
    predict: str | None = None  # the question the room answers with a number first
    unit: str = ""  # the guess's unit, e.g. "× faster"
    why: str = ""  # one sentence shown beside guess and result


def parse_screens(text: str) -> tuple[Screen, ...]:
    """The screens of `assets/presenter.md`: a `## ` heading per screen, its settings on the lines
    under it (`measure`, `button`, and where the room guesses first `predict`, `unit`, `why`),
    then its text; the part before the first `## ` is a preface.

    >>> s = parse_screens("# x\\n\\n## Hello\\nmeasure: tokens\\nbutton: Go\\n\\nText.")
    >>> (s[0].title, s[0].measure, s[0].body)
    ('Hello', 'tokens', 'Text.')
    """
    screens = []
    for part in ("\n" + text).split("\n## ")[1:]:
        title, _, rest = part.partition("\n")
        head, _, body = rest.partition("\n\n")
        fields = {}
        for line in head.splitlines():
            key, sep, value = line.partition(":")
            if not sep or key.strip() not in ("measure", "button", "predict", "unit", "why"):
                raise ValueError(f"presenter screen {title!r}: unknown setting line {line!r}")
            fields[key.strip()] = value.strip()
        if "measure" not in fields or "button" not in fields:
            raise ValueError(f"presenter screen {title!r} needs `measure:` and `button:` lines")
        screens.append(Screen(title=title.strip(), body=body.strip(), **fields))
    return tuple(screens)


def load_screens(info=None) -> tuple[Screen, ...]:
    return parse_screens(lesson_text("presenter.md", info))


def guess_error(guess: float, measured: float) -> float:
    """How far off a guess is, as a factor ≥ 1 (2.0: half or double the measurement)."""
    if guess <= 0 or measured <= 0:
        return math.inf
    return max(guess / measured, measured / guess)


def verdict(guess: float, measured: float) -> str:
    off = guess_error(guess, measured)
    if off <= CLOSE:
        return "close: well predicted"
    if guess < measured:
        return f"too low: the measurement is {off:.1f}× your guess"
    return f"too high: your guess is {off:.1f}× the measurement"


def fmt(x: float) -> str:
    """A ratio as people say it: 3.2, 2, 14, 120."""
    return f"{x:.1f}".rstrip("0").rstrip(".") if abs(x) < 10 else f"{x:,.0f}"


def comparison_md(guess: float | None, measured: float, unit: str, why: str,
                  source: str = "**measured:**", run: str = "this run") -> str:
    """Guess against measurement and why (0: no guess typed). `source` names the figure.

    >>> comparison_md(2, 10, "×", "Because.").splitlines()[0]
    '**Your guess:** 2 × · **measured:** 10 ×, too low: the measurement is 5.0× your guess'
    """
    got = f"{source} {measured_with_unit(measured, unit, run)}"
    if guess is None or guess == 0 or not math.isfinite(guess):
        head = f"**No guess typed** · {got}. Next time, write a number first: it sticks better."
    elif guess <= 0:
        head = f"**Your guess:** {fmt(guess)} (needs to be above 0) · {got}"
    else:
        head = f"**Your guess:** {fmt(guess)} {unit} · {got}, {verdict(guess, measured)}"
    return f"{head}\n\n**Why:** {why}" if why else head


def measured_with_unit(measured: float, unit: str, run: str = "this run") -> str:
    """A measurement and its unit; "faster" only above the shared margin.

    >>> measured_with_unit(3.24, "× faster"), measured_with_unit(0.7, "× faster")
    ('3.2 × faster', '0.7 × (not faster on this run)')
    """
    if unit.endswith("faster") and ratio_side(measured) != "faster":
        return f"{fmt(measured)} {unit.removesuffix('faster').strip()} (not faster on {run})"
    return f"{fmt(measured)} {unit}".strip()


@cache
def question(key: str) -> Screen:
    """The presenter screen that asks about measurement `key` (its `predict`, `unit`, `why`)."""
    screen = next((s for s in load_screens() if s.measure == key), None)
    if screen is None or screen.predict is None:
        raise KeyError(f"no presenter screen asks for a guess about {key!r}")
    return screen


def beside_guess_md(screen: Screen, guess: float | None, measured: float, shown: str,
                    noisy: bool, reference: QuietFigure | None = None) -> str:
    """The guess beside a measurement of `screen`'s question: judged against it from a quiet
    run; from a busy one, against this machine's quiet `reference`, or without one, no verdict."""
    if not noisy:
        return comparison_md(guess, measured, screen.unit, screen.why)
    if reference is None:  # no verdict, no "faster", no why
        typed = f"**Your guess:** {fmt(guess)} {screen.unit.strip()} · " if guess else ""
        return f"{typed}**measured:** {shown} on a busy machine: run again to compare."
    head = comparison_md(guess, reference.value, screen.unit, "",
                         f"**this machine, quiet** (measured {reference.when()}):", "that run")
    busy = f"{head.rstrip('.')}. This run: {shown} on a busy machine."
    return f"{busy}\n\n**Why:** {screen.why}" if screen.why else busy


def guess_md(key: str, guess: float | None, measured: float, noisy: bool = False,
             reference: QuietFigure | None = None) -> str:
    """A lesson's guess box beside this run's measurement (`beside_guess_md`)."""
    q = question(key)
    shown = f"{fmt(measured)} {q.unit.removesuffix('faster').strip()}"  # no "faster" by itself
    return "\n\n---\n**Predict, then measure.** " + beside_guess_md(q, guess, measured, shown,
                                                                      noisy, reference)
