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
