"""Sliders, number boxes, prompt boxes and guess boxes built from `Settings`, so a control's
bounds, default and step are the engine's own. Each carries its range's name as an element
class (`limit-<name>`), which the test that walks every slider reads back (`limit_name`,
tests/test_settings.py)."""
from __future__ import annotations

import gradio as gr

from inference.config import Range, Settings

from .predictions import question


def _kw(settings: Settings, name: str, kw: dict) -> tuple[Range, dict]:
    rng = settings.ranges()[name]
    classes = list(kw.pop("elem_classes", None) or []) + [f"limit-{name}"]
    return rng, dict(elem_classes=classes, **kw)


def slider(settings: Settings, name: str, label: str, **kw) -> gr.Slider:
    rng, kw = _kw(settings, name, kw)
    kw.setdefault("value", rng.default)
    return gr.Slider(rng.low, rng.high, step=rng.step, label=label, **kw)


def number(settings: Settings, name: str, label: str, **kw) -> gr.Number:
    """A number box bounded by `settings.<name>`; whole numbers when the step is whole."""
    rng, kw = _kw(settings, name, kw)
    kw.setdefault("value", rng.default)
    if float(rng.step).is_integer():
        kw.setdefault("precision", 0)
    kw.setdefault("step", rng.step)
    return gr.Number(label=label, minimum=rng.low, maximum=rng.high, **kw)


def prompt_box(settings: Settings, value: str, elem_id: str, label: str = "Prompt",
               lines: int = 2, **kw) -> gr.Textbox:
    return gr.Textbox(value, label=label, lines=lines, max_length=settings.max_prompt_chars,
                      elem_id=elem_id, **kw)


def guess_box(settings: Settings, key: str, ask: str, elem_id: str) -> gr.Number:
    """'Your guess first: <ask> (<unit>; 0 = no guess)': an empty number box shows 0."""
    unit = question(key).unit.strip()
    return number(settings, "guess", f"Your guess first: {ask} ({unit}; 0 = no guess)",
                  value=0, elem_id=elem_id, elem_classes=["lab-guess"])
