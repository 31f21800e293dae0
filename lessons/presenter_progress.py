"""What the presenter shows: a measurement's `Step`s between its parts, each with its running
line ("⏳ race step 5 of 64 · with the cache 0.41 s · …"), then one `Measured` headline; the
visitor's record (their screen, guesses and results, kept in their browser); and what a result
shows: the guess beside it, a cost withdrawn when their newer batch sweep contradicts it, and
the recap's five numbers, each saying where it came from.
"""
from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, fields

from inference.experiments.batch_sweep import BatchPoint
from inference.experiments.kv_race import RECOMPUTE
from inference.experiments.noise import Noise
from inference.experiments.quiet_reference import QuietFigure
from inference.experiments.sanity import same_throughput
from visualizations.cards import human_bytes, ratio_side
from visualizations.noise_view import BUSY

from .common.predictions import beside_guess_md
from .common.presenter_screens import Screen

RECAP = "recap"  # gathers the visitor's own results: no model run
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


@dataclass(frozen=True)
class RecapFigure:
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
    got = shown_result(key, results)
    if not got or got.get("shown") in (None, "—"):
        return _not_yet(screens, key, name)
    busy = " · busy machine" if got.get("noisy") else ""
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
                         f"{f['fp32_bytes_per_weight']:.1f} → {f['int8_bytes_per_weight']:.2f}")
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


@dataclass(frozen=True)
class Step:
    """A long measurement between two parts: "⏳ decode step 5 of 23 · 13.4 tokens/s so far"."""

    counted: str  # what is counted, e.g. "decode step", "token"
    done: int
    total: int
    running: str  # the figure measured so far, e.g. "13.4 tokens/s so far (median)"


@dataclass(frozen=True)
class Measured:
    """One screen's headline: the number, as shown, what it is, and the figures behind it."""

    key: str
    value: float  # the headline number, compared with a guess on predict screens
    shown: str  # e.g. "12.3×", "41 ms"
    label: str  # e.g. "faster in one pass"
    detail: str  # one line of the measured figures behind the headline
    noisy: bool = False  # the machine was busy while measuring (noise.py): no verdict drawn
    figures: dict = field(default_factory=dict)  # plain numbers the cost screen or recap reads
    reference: QuietFigure | None = None  # the quiet figure a busy run's guess is judged by

    def as_dict(self) -> dict:
        return asdict(self)


def busy_label(label: str, judged: Noise) -> str:
    return f"{label} · {BUSY}" if judged.busy else label


def withheld(key: str, why: str, detail: str) -> Measured:
    """A figure physics rules out (`sanity.py`) twice: the reason instead of a number."""
    return Measured(key, 0.0, "—", "no figure from this run: it cannot be right",
                    f"{why} Measured twice; press the button again. ({detail})", True)


def first_and_next(events) -> str:
    first = f"first token {events[0].seconds * 1000:.0f} ms"
    later = sorted(e.seconds for e in events[1:])
    median = f" · next tokens {later[len(later) // 2] * 1000:.0f} ms each so far" if later else ""
    text = events[-1].text.strip().replace("\n", " ")
    return f"{first}{median} (measured) · “{'…' if len(text) > 48 else ''}{text[-48:]}”"


def cache_running(events) -> str:
    e = events[-1]
    return f"cache {human_bytes(e.cache_bytes)} after {e.cache_tokens} tokens (measured)"


def prefill_running(progress) -> str:
    if progress.feeding:
        one, fed, so_far = progress.one_pass_seconds, progress.fed_seconds, " so far"
    else:
        p = progress.points[-1]
        one, fed, so_far = p.parallel_seconds, p.sequential_seconds, ""
    return (f"one pass {one * 1000:.0f} ms · one token at a time {fed * 1000:.0f} ms{so_far} "
            "(measured)")


def spec_running(passes) -> str:
    # the prefill, pass 0, makes the first token
    verified = len(passes) - 1
    if verified < 1:
        return "the prefill made the first token"
    made = passes[-1].tokens_so_far - passes[0].tokens_so_far
    return (f"{made / verified:.2f} tokens per pass so far ({made} tokens in {verified} "
            f"pass{'es' if verified != 1 else ''})")


def ratio_label(ratio: float, faster: str, plain: str, what: str,
                judged: Noise | None = None) -> str:
    """A time ratio's label: "faster …" only above the shared margin (`ratio_side`), else the
    ratio named `plain`ly, "not faster on this run"; on a busy run, plainly with the notice.

    >>> ratio_label(0.9, "faster with the cache", "recomputing ÷ cached", "24 tokens")
    'recomputing ÷ cached (24 tokens): not faster on this run'
    """
    if judged is not None and judged.busy:
        return f"{plain} ({what}): {BUSY}"
    return (f"{faster} ({what})" if ratio_side(ratio) == "faster"
            else f"{plain} ({what}): not faster on this run")


def race_running(steps) -> str:
    cached = sum(t.seconds for t in steps if t.lane != RECOMPUTE)
    again = sum(t.seconds for t in steps if t.lane == RECOMPUTE)
    return (f"with the cache {cached:.2f} s · recomputing everything {again:.2f} s so far "
            "(measured)")


def long_running(points, repeats: int) -> str:
    steps = " · ".join(f"{p.cache_tokens:,} cached tokens: {p.seconds * 1000:.1f} ms a step"
                       for p in points)
    return f"{steps} (measured, " + (f"median of {repeats} runs)" if repeats > 1 else "one run)")


def batch_running(update) -> str:
    if not update.points:
        return update.message  # e.g. "Batch 1: prefilling 1 × 20 prompt tokens…"
    p = update.points[-1]
    return f"batch {p.batch}: {p.tokens_per_s:.1f} tokens/s (measured) · {update.message}"


LAYER = re.compile(r"\blayers\.(\d+)\.")  # a decoder layer's matrix: "model.layers.12.mlp.up_proj"


def build_step(name: str, progress, layers: int) -> Step:
    """A mode's build as "building int8: layers converted 12 of 30" (0 while the model is
    copied, all once past the last layer)."""
    now = LAYER.search(progress.message)
    done = int(now.group(1)) if now else (layers if progress.done else 0)
    return Step(f"building {name}: layers converted", done, layers, progress.message)


def int8_running(run, fp32=None) -> str:
    now = (f"{run.decode_tokens_per_s:.1f} tokens/s so far (measured)" if run.step_seconds
           else f"prefill {run.prefill_seconds * 1000:.0f} ms, the first token (measured)")
    return now if fp32 is None else f"{now} · float32 {fp32.decode_tokens_per_s:.1f} tokens/s"
