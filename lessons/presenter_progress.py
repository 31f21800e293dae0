"""The presenter's record of one visitor: which screen they are on, the guesses they typed and
the results measured for them, kept in their browser (a reload resumes there) and cleaned
whatever storage held. Also what a result shows: the guess beside it (a verdict only from a
quiet run: this one, or this machine's quiet reference), a cost withdrawn when the visitor's
newer batch sweep contradicts it, and the recap slide's five big numbers, each saying where it
came from (never a number for a screen not run).
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, fields

from inference.experiments.batch_sweep import BatchPoint
from inference.experiments.noise import Noise
from inference.experiments.quiet_reference import QuietFigure
from inference.experiments.sanity import same_throughput
from visualizations.noise_view import BUSY

from .common.predictions import beside_guess_md
from .common.presenter_screens import Screen

RECAP = "recap"  # gathers the visitor's own results: no model run
NOT_YET = "not measured yet"  # a recap figure whose screen has not run
BATCH_KEY, COST_KEY = "batch", "cost"  # the two screens' `measure:` keys
POINT_FIELDS = {f.name for f in fields(BatchPoint)}


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
    reference: QuietFigure | None = None  # this machine's quiet figure for the same quantity:
    # a busy run's guess is judged against it (kept in the record as a dict)

    def as_dict(self) -> dict:
        return asdict(self)


def fresh() -> dict:
    """A new visitor's progress (new inner dicts: no visitor's guess lands in another's)."""
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


def compare_text(screen: Screen, progress: dict) -> str:
    """Below the result: guess vs measurement, or (before the run, or no guess asked) nothing."""
    got = shown_result(screen.measure, progress["results"])  # a withdrawn cost: no verdict
    if screen.predict is None or got is None:
        return ""
    return beside_guess_md(screen, progress["guesses"].get(screen.measure), got.get("value"),
                           got.get("shown"), bool(got.get("noisy")), kept(got.get("reference")))


def kept(stored) -> QuietFigure | None:
    """The quiet reference a stored result carries, or None (none, or one that does not read
    back: the record lives in the visitor's browser)."""
    if not isinstance(stored, dict):
        return None
    try:
        ref = QuietFigure(**stored)
        ref.when()  # its time reads back
    except (TypeError, ValueError):
        return None
    return ref if isinstance(ref.value, (int, float)) and ref.value > 0 else None


def busy_label(label: str, judged: Noise) -> str:
    """A headline's label, with the busy notice after it when the machine was busy."""
    return f"{label} · {BUSY}" if judged.busy else label


def withheld(key: str, why: str, detail: str) -> Measured:
    """A figure physics rules out (`sanity.py`), still so when measured again: no number on
    the screen, no guess judged against it, the reason instead."""
    return Measured(key, 0.0, "—", "no figure from this run: it cannot be right",
                    f"{why} Measured twice; press the button again. ({detail})", True)


def sweep_figures(points) -> dict:
    """A finished batch sweep as plain numbers the visitor's record holds (the cost screen
    prices them instead of measuring another sweep), with when it ran."""
    return {"sweep": [asdict(p) for p in points], "at": time.strftime("%H:%M")}


def visitor_sweep(result: dict | None) -> tuple[tuple[BatchPoint, ...], bool, str] | None:
    """(points, measured on a busy machine, when) of the sweep a visitor's batching screen
    measured; None when they have not run it (or their record's copy does not read back)."""
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


def withdrawn_cost(results: dict) -> str | None:
    """Why the visitor's cost no longer stands (their newest batch sweep measured another
    throughput at the batch it priced), or None."""
    cost = (results.get(COST_KEY) or {}).get("figures") or {}
    own = visitor_sweep(results.get(BATCH_KEY)) if "batch" in cost else None
    at_batch = [p for p in own[0] if p.batch == cost["batch"]] if own else []
    if not at_batch:
        return None
    return same_throughput(cost["batch"], float(cost["tokens_per_s"]), at_batch[0].tokens_per_s)


def shown_result(key: str, results: dict) -> dict | None:
    """The result a screen shows: as measured, except a withdrawn cost (no figure, and why)."""
    got = results.get(key)
    why = withdrawn_cost(results) if key == COST_KEY and got else None
    if why is None:
        return got
    return {**got, "shown": "—", "noisy": True, "label": "no cost from this run",
            "detail": f"{why} Press the button again: it prices your newest batch sweep."}


@dataclass(frozen=True)
class RecapFigure:
    """One of the five: its name, the number as shown (or None), what it is, where it is from."""

    name: str
    shown: str | None  # None: not measured yet
    label: str
    source: str  # "measured here · screen 11", "theoretical: …", "not measured yet: screen 11"


def _screen(screens, key: str) -> int:
    return next((i for i, s in enumerate(screens) if s.measure == key), -1) + 1


def _not_yet(screens, key: str, name: str) -> RecapFigure:
    return RecapFigure(name, None, "", f"{NOT_YET}: screen {_screen(screens, key)}")


def _measured(screens, key: str, results: dict, name: str, label: str,
              shown: str | None = None) -> RecapFigure:
    """A screen's own headline (or `shown`, a figure from it), labelled with its screen."""
    got = shown_result(key, results)
    if not got or got.get("shown") in (None, "—"):
        return _not_yet(screens, key, name)
    busy = " · busy machine" if got.get("noisy") else ""
    return RecapFigure(name, shown or got["shown"], label,
                       f"measured here · screen {_screen(screens, key)}{busy}")


def first_vs_next(screens, results: dict) -> RecapFigure:
    """The first token's wait against each next token's, from the first screen that timed both
    (the prompt's screen, then decoding's, then the opening answer)."""
    for key in ("prefill", "decode", "answer"):
        f = (results.get(key) or {}).get("figures") or {}
        if f.get("first_ms") and f.get("next_ms"):
            return _measured(screens, key, results, "First vs next token",
                             "ms: the prefill's wait, then each next token",
                             f"{f['first_ms']:.0f} vs {f['next_ms']:.0f}")
    return _not_yet(screens, "prefill", "First vs next token")


def bytes_per_weight(screens, results: dict, dtype_bytes: int) -> RecapFigure:
    """int8's bytes per weight against the loaded model's: counted from the built models'
    tensors when the int8 screen ran, else the formats' own sizes (theoretical)."""
    f = (results.get("int8") or {}).get("figures") or {}
    if f.get("fp32_bytes_per_weight") and f.get("int8_bytes_per_weight"):
        return _measured(screens, "int8", results, "Bytes per weight",
                         "float32 → int8, counted from the built models",
                         f"{f['fp32_bytes_per_weight']:.1f} → {f['int8_bytes_per_weight']:.2f}")
    return RecapFigure("Bytes per weight", f"{dtype_bytes} → 1",
                       f"this model's {dtype_bytes}-byte weights → int8",
                       "theoretical: the formats' sizes (int8 adds a scale per row)")


def recap_figures(screens, results: dict, dtype_bytes: int) -> list[RecapFigure]:
    """The five, in the story's order."""
    return [first_vs_next(screens, results),
            _measured(screens, "kv_race", results, "KV cache",
                      "recomputing ÷ cached, same tokens"),
            _measured(screens, "batch", results, "Batching", "tokens/s, full batch ÷ one"),
            bytes_per_weight(screens, results, dtype_bytes),
            _measured(screens, "cost", results, "Dollars per million",
                      "output tokens, full batch")]


class PageScreens:
    """Which screen each open page shows now, as its own moves said (the newest of at most
    `limit` pages): a measurement that ends after the presenter turned pages lands in the
    visitor's progress without turning the page back to the screen it was started on."""

    def __init__(self, limit: int) -> None:  # Settings.sessions_held: as many as visitors held
        self._limit = limit
        self._at: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def moved(self, page: str | None, screen: int) -> None:
        """Page `page` now shows `screen` (None: a page without an id, not remembered)."""
        if page is None:
            return
        with self._lock:
            self._at[page] = screen
            self._at.move_to_end(page)
            while len(self._at) > self._limit:
                self._at.popitem(last=False)

    def now(self, page: str | None, otherwise: int) -> int:
        """The screen `page` shows now, or `otherwise` when it never moved (or was forgotten)."""
        with self._lock:
            return self._at.get(page, otherwise) if page is not None else otherwise
