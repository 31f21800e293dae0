"""The presenter's record of one visitor: which screen they are on, the guesses they typed and
the results measured for them (kept in their browser, so a reload resumes there), cleaned
whatever storage held, and the line under a result that sets their guess beside it, with a
verdict only from a quiet run. `presenter_handlers` runs the measurements that fill it."""
from __future__ import annotations

from visualizations.presenter_view import recap_md

from .common.predictions import beside_noisy_md, comparison_md
from .common.presenter_screens import Screen

RECAP = "recap"  # gathers the visitor's own results: no model run


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
    """Below the result: the recap, guess vs measurement, or (before the run) nothing."""
    if screen.measure == RECAP:
        return recap_md(screens, progress["results"]) if RECAP in progress["results"] else ""
    got = progress["results"].get(screen.measure)
    if screen.predict is None or got is None:
        return ""
    if got.get("noisy"):  # measured on a busy machine: beside the guess, no verdict
        return beside_noisy_md(progress["guesses"].get(screen.measure), screen.unit,
                               got["shown"])
    return comparison_md(progress["guesses"].get(screen.measure), got["value"], screen.unit,
                         screen.why)
