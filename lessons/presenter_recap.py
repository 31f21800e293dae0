"""The recap slide: the story's five big numbers, from this visitor's own screens: the first
token against the next one, the KV cache's speed-up, batching's gain, bytes per weight, and
dollars per million tokens. Each says where it came from (measured here, on which screen; or
theoretical, from a format's definition); a screen not run yet says so, never a number.
Pure: reads the visitor's results (the dicts `presenter_progress.Measured` stores)."""
from __future__ import annotations

from dataclasses import dataclass

from .presenter_sweep import shown_result

NOT_YET = "not measured yet"


@dataclass(frozen=True)
class RecapFigure:
    """One of the five: its name, the number as shown (or None), what it is, where it is from."""

    name: str
    shown: str | None  # None: not measured yet
    label: str
    source: str  # "measured here · screen 11", "theoretical: …", "not measured yet: run …"


def _screen(screens, key: str) -> tuple[int, str]:
    i = next((i for i, s in enumerate(screens) if s.measure == key), -1)
    return i + 1, screens[i].title if i >= 0 else key


def _measured(screens, key: str, results: dict, name: str, label: str | None = None,
              shown: str | None = None) -> RecapFigure:
    """A screen's own headline (or `shown`, a figure from it), labelled with its screen."""
    n, title = _screen(screens, key)
    got = shown_result(key, results)
    if not got or got.get("shown") in (None, "—"):
        return RecapFigure(name, None, label or "", f"{NOT_YET}: run screen {n}, “{title}”")
    busy = " · on a busy machine" if got.get("noisy") else ""
    return RecapFigure(name, shown or got["shown"], label or got.get("label", ""),
                       f"measured here · screen {n}, “{title}”{busy}")


def first_vs_next(screens, results: dict) -> RecapFigure:
    """The first token's wait against each next token's, from the first screen that timed both
    (the prompt's screen, then decoding's, then the opening answer)."""
    for key in ("prefill", "decode", "answer"):
        f = (results.get(key) or {}).get("figures") or {}
        if f.get("first_ms") and f.get("next_ms"):
            return _measured(screens, key, results, "First token vs next token",
                             "the first token's wait (the prefill) against each next token",
                             f"{f['first_ms']:.0f} vs {f['next_ms']:.0f} ms")
    n, title = _screen(screens, "prefill")
    return RecapFigure("First token vs next token", None, "", f"{NOT_YET}: run screen {n}, "
                       f"“{title}”")


def bytes_per_weight(screens, results: dict, dtype_bytes: int) -> RecapFigure:
    """int8's bytes per weight against the loaded model's: counted from the built models'
    tensors when the int8 screen ran, else the formats' own sizes (theoretical)."""
    f = (results.get("int8") or {}).get("figures") or {}
    if f.get("fp32_bytes_per_weight") and f.get("int8_bytes_per_weight"):
        return _measured(screens, "int8", results, "Bytes per weight",
                         "float32 against int8, counted from the built models' tensors",
                         f"{f['fp32_bytes_per_weight']:.1f} → {f['int8_bytes_per_weight']:.2f}")
    return RecapFigure("Bytes per weight", f"{dtype_bytes} → 1",
                       f"this model's {dtype_bytes}-byte weights against int8's one byte",
                       "theoretical: the formats' sizes (int8 adds a scale per row)")


def recap_figures(screens, results: dict, dtype_bytes: int) -> list[RecapFigure]:
    """The five, in the story's order."""
    return [first_vs_next(screens, results),
            _measured(screens, "kv_race", results, "KV cache"),
            _measured(screens, "batch", results, "Batching"),
            bytes_per_weight(screens, results, dtype_bytes),
            _measured(screens, "cost", results, "Dollars per million tokens")]
