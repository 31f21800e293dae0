"""The presenter's record of one visitor: which screen they are on, the guesses they typed and
the results measured for them (kept in their browser, so a reload resumes there), cleaned
whatever storage held, and the line under a result that sets their guess beside it, with a
verdict only from a quiet run. `presenter_handlers` runs the measurements that fill it."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from inference.experiments.noise import Noise
from visualizations.noise_view import BUSY

from .common.predictions import beside_noisy_md, comparison_md
from .common.presenter_screens import Screen
from .presenter_sweep import shown_result

RECAP = "recap"  # gathers the visitor's own results: no model run


@dataclass(frozen=True)
class Measured:
    """One screen's headline: the number, how it is shown, what it is, and the figures behind."""

    key: str
    value: float  # the headline number, compared with a guess on predict screens
    shown: str  # e.g. "12.3×", "41 ms"
    label: str  # e.g. "faster in one pass"
    detail: str  # one line of the measured figures behind the headline
    noisy: bool = False  # the machine was busy while measuring (noise.py): no verdict drawn
    figures: dict = field(default_factory=dict)  # plain numbers another screen reads (the
    # batch sweep's points for the cost screen, the first and next token for the recap)

    def as_dict(self) -> dict:
        return asdict(self)


def fresh() -> dict:
    """A new visitor's progress: the first screen, no guesses, no results. A new dict (and new
    inner dicts) every call: one visitor's guesses never land in another's record."""
    return {"screen": 0, "guesses": {}, "results": {}, "page": None}  # page: who wrote it last


def clean(progress) -> dict:
    """The visitor's stored progress, or a fresh one where storage held something else."""
    if not isinstance(progress, dict):
        return fresh()
    return {"screen": progress.get("screen", 0) if isinstance(progress.get("screen"), int)
            else 0,
            "guesses": dict(progress.get("guesses") or {}),
            "results": dict(progress.get("results") or {}),
            "page": progress.get("page") if isinstance(progress.get("page"), str) else None}


def page_id(request) -> str | None:
    """This page load's id (Gradio's session hash): a reload or another tab gets a new one."""
    return getattr(request, "session_hash", None) if request is not None else None


def at(screens: tuple[Screen, ...], progress: dict) -> tuple[int, Screen]:
    i = min(max(progress["screen"], 0), len(screens) - 1)
    return i, screens[i]


def compare_text(screen: Screen, progress: dict, screens: tuple[Screen, ...]) -> str:
    """Below the result: guess vs measurement, or (before the run, or no guess asked) nothing."""
    got = shown_result(screen.measure, progress["results"])  # a withdrawn cost: no verdict
    if screen.predict is None or got is None:
        return ""
    if got.get("noisy"):  # measured on a busy machine: beside the guess, no verdict
        return beside_noisy_md(progress["guesses"].get(screen.measure), screen.unit,
                               got["shown"])
    return comparison_md(progress["guesses"].get(screen.measure), got["value"], screen.unit,
                         screen.why)


def busy_label(label: str, judged: Noise) -> str:
    """A headline's label, with the busy notice after it when the machine was busy."""
    return f"{label} · {BUSY}" if judged.busy else label


def withheld(key: str, why: str, detail: str) -> Measured:
    """A figure physics rules out (`sanity.py`), still so when measured again: no number on
    the screen, no guess judged against it, the reason instead."""
    return Measured(key, 0.0, "—", "no figure from this run: it cannot be right",
                    f"{why} Measured twice; press the button again. ({detail})", True)
