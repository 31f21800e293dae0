"""What the presenter keeps for a visitor (their screen, guesses and results, in their browser)
and what a result shows: the guess beside it, a cost withdrawn when their newer batch sweep
contradicts it, and the recap's five numbers, each saying where it came from.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import asdict, fields
from typing import NamedTuple

from inference.experiments.batch_sweep import BatchPoint
from inference.experiments.noise import same_throughput
from inference.experiments.quiet_reference import QuietFigure

from .common.predictions import Screen, beside_guess_md

NOT_YET = "not measured yet"  # a recap figure whose screen has not run
BATCH_KEY, COST_KEY = "batch", "cost"  # the two screens' `measure:` keys
POINT_FIELDS = {f.name for f in fields(BatchPoint)}


def fresh() -> dict:
    return {"screen": 0, "guesses": {}, "results": {}, "page": None}  # page: who wrote it last


def clean(progress) -> dict:
    """The visitor's stored progress, or a fresh one where storage held something else."""
    if not isinstance(progress, dict):
        return fresh()
    screen, page = progress.get("screen"), progress.get("page")
    return {"screen": screen if isinstance(screen, int) else 0,
            "guesses": dict(progress.get("guesses") or {}),
            "results": dict(progress.get("results") or {}),
            "page": page if isinstance(page, str) else None}


def page_id(request) -> str | None:
    """This page load's id (Gradio's session hash): new on a reload or in another tab."""
    return getattr(request, "session_hash", None) if request is not None else None


def screen_index(screens: tuple[Screen, ...], progress: dict) -> int:
    """The screen the progress shows, within the screens there are."""
    return min(max(progress["screen"], 0), len(screens) - 1)


def compare_text(screen: Screen, progress: dict) -> str:
    """Below the result: guess vs measurement ("" before the run, or with no guess asked)."""
    got = shown_result(screen.measure, progress["results"])  # a withdrawn cost: no verdict
    if screen.predict is None or got is None:
        return ""
    return beside_guess_md(screen, progress["guesses"].get(screen.measure), got.get("value"),
                           got.get("shown"), bool(got.get("noisy")), kept(got.get("reference")))


def kept(stored) -> QuietFigure | None:
    """The quiet reference a stored result carries, or None where it does not read back."""
    if not isinstance(stored, dict):
        return None
    try:
        ref = QuietFigure(**stored)
        ref.when()  # its time reads back
    except (TypeError, ValueError):
        return None
    return ref if isinstance(ref.value, (int, float)) and ref.value > 0 else None


def sweep_figures(points) -> dict:
    """A finished batch sweep as plain numbers for the visitor's record, with when it ran."""
    return {"sweep": [asdict(p) for p in points], "at": time.strftime("%H:%M")}


def visitor_sweep(result: dict | None) -> tuple[tuple[BatchPoint, ...], bool, str] | None:
    """(points, busy, when) of the visitor's batch sweep; None when not run or unreadable."""
    figures = (result or {}).get("figures") or {}
    raw = figures.get("sweep")
    if not isinstance(raw, list) or not raw:
        return None
    try:
        points = tuple(BatchPoint(**{k: tuple(v) if isinstance(v, list) else v
                                     for k, v in d.items() if k in POINT_FIELDS}) for d in raw)
        if any(p.step_seconds <= 0 or p.batch < 1 for p in points):
            return None
    except (TypeError, ValueError, AttributeError):
        return None
    return points, bool((result or {}).get("noisy")), str(figures.get("at", ""))


def shown_result(key: str, results: dict) -> dict | None:
    """The result a screen shows: as measured, except a cost withdrawn (and why) when the
    visitor's newer batch sweep measured another throughput at the batch it priced."""
    got = results.get(key)
    cost = (got.get("figures") or {}) if key == COST_KEY and got else {}
    own = visitor_sweep(results.get(BATCH_KEY)) if "batch" in cost else None
    at_batch = [p for p in own[0] if p.batch == cost["batch"]] if own else []
    why = (same_throughput(cost["batch"], float(cost["tokens_per_s"]), at_batch[0].tokens_per_s)
           if at_batch else None)
    if why is None:
        return got
    return {**got, "shown": "—", "noisy": True, "label": "no cost from this run",
            "detail": f"{why} Press the button again: it prices your newest batch sweep."}


class RecapFigure(NamedTuple):
    name: str
    shown: str | None  # None: not measured yet
    label: str
    source: str  # "measured here · screen 11", "theoretical: …", "not measured yet: screen 11"


def _screen(screens, key: str) -> int:
    return next((i for i, s in enumerate(screens) if s.measure == key), -1) + 1


def _not_yet(screens, key: str, name: str) -> RecapFigure:
    return RecapFigure(name, None, "", f"{NOT_YET}: screen {_screen(screens, key)}")


def _measured(screens, key: str, results: dict, name: str, label: str,
              shown: str | None = None, timed: bool = True) -> RecapFigure:
    """The screen's figure, marked "busy machine" where its run was noisy and the figure is a
    time (`timed`; a count of bytes is the same on a busy machine)."""
    got = shown_result(key, results)
    if not got or got.get("shown") in (None, "—"):
        return _not_yet(screens, key, name)
    busy = " · busy machine" if timed and got.get("noisy") else ""
    return RecapFigure(name, shown or got["shown"], label,
                       f"measured here · screen {_screen(screens, key)}{busy}")


def first_vs_next(screens, results: dict) -> RecapFigure:
    """The first token's wait against each next one's, from the first screen that timed both."""
    for key in ("prefill", "decode", "answer"):
        f = (results.get(key) or {}).get("figures") or {}
        if f.get("first_ms") and f.get("next_ms"):
            return _measured(screens, key, results, "First vs next token",
                             "ms: the prefill's wait, then each next token",
                             f"{f['first_ms']:.0f} vs {f['next_ms']:.0f}")
    return _not_yet(screens, "prefill", "First vs next token")


def bytes_per_weight(screens, results: dict, dtype_bytes: int) -> RecapFigure:
    """int8's bytes per weight against float32's as counted by the int8 screen, else the
    loaded model's against int8's (theoretical)."""
    f = (results.get("int8") or {}).get("figures") or {}
    if f.get("fp32_bytes_per_weight") and f.get("int8_bytes_per_weight"):
        return _measured(screens, "int8", results, "Bytes per weight",
                         "float32 → int8, counted from the built models",
                         f"{f['fp32_bytes_per_weight']:.1f} → {f['int8_bytes_per_weight']:.2f}",
                         timed=False)
    return RecapFigure("Bytes per weight", f"{dtype_bytes} → 1",
                       f"this model's {dtype_bytes}-byte weights → int8",
                       "theoretical: the formats' sizes (int8 adds a scale per row)")


def recap_figures(screens, results: dict, dtype_bytes: int) -> list[RecapFigure]:
    return [first_vs_next(screens, results),
            _measured(screens, "kv_race", results, "KV cache",
                      "recomputing ÷ cached, same tokens"),
            _measured(screens, "batch", results, "Batching", "tokens/s, full batch ÷ one"),
            bytes_per_weight(screens, results, dtype_bytes),
            _measured(screens, "cost", results, "Dollars per million",
                      "output tokens, full batch")]


class PageScreens:
    """Which screen each open page shows by its own moves (the newest `limit` pages): a
    measurement ending after a move does not turn the page back."""

    def __init__(self, limit: int) -> None:  # Settings.sessions_held: as many as visitors held
        self._limit = limit
        self._at: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def moved(self, page: str | None, screen: int) -> None:
        if page is None:
            return
        with self._lock:
            self._at[page] = screen
            self._at.move_to_end(page)
            while len(self._at) > self._limit:
                self._at.popitem(last=False)

    def now(self, page: str | None, otherwise: int) -> int:
        with self._lock:
            return self._at.get(page, otherwise) if page is not None else otherwise
