"""One input check for every endpoint: what a visitor (or a script) sends is checked against
the component it claims to fill before any handler runs, and anything wrong gets the app's own
sentence, never a bare "Error", a Gradio type repr or a validation dump.

The browser only ever sends what its controls allow (a checkbox sends true or false, a dropdown
one of its choices), but Gradio's queue takes any JSON from anyone. `check_every_input` wraps
the one place where Gradio turns an event's raw values into a handler's arguments
(`Blocks.preprocess_data`), so every registered event, private ones included, is checked the
same way, and an endpoint added tomorrow is checked without a line of its own:

- arity: exactly as many values as the event has inputs;
- a checkbox is true or false; a dropdown, radio or checkbox group holds its own choices;
- a number or slider is a finite number (no NaN, no infinity, no word, no true/false);
- a text box holds text, at most its character limit (the box's own `max_length`, else the
  app's `max_prompt_chars`), enforced here whatever the page says;
- `None` only where the control itself can be empty (a guess box that starts empty);
- lone surrogates (half of a UTF-16 pair, which no text encoding can carry) become "?" in
  every string a client sends, before a handler sees it.
"""
from __future__ import annotations

import math
from typing import Any

import gradio as gr

SERVER_SIDE = (gr.State,)  # held on the server: a client's value is never used
TEXTY = (gr.Textbox, gr.Code)
CHOICES = (gr.Dropdown, gr.Radio)
SHOWN = 40  # a wrong value is quoted at most this long
EMPTY_OK = "lab-guess"  # number boxes whose handler reads empty as "no answer" (controls.guess_box)


class InputRefused(gr.Error):
    """A value that does not fit its control; the message says what would."""

    def __init__(self, message: str) -> None:
        super().__init__(message, print_exception=False)


def clean_surrogates(value: Any) -> Any:
    """Every string in `value` (nested in lists and dicts too) without lone surrogates.

    >>> clean_surrogates(["a\\ud800b", {"k": "\\udfff"}])
    ['a?b', {'k': '?'}]
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list):
        return [clean_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {clean_surrogates(k): clean_surrogates(v) for k, v in value.items()}
    return value


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    text = text[:SHOWN] + ("…" if len(text) > SHOWN else "")
    return "“" + text + "”"


def _name(block) -> str:
    return getattr(block, "label", None) or "This setting"


def _choice_values(block) -> list:
    return [value for _, value in (getattr(block, "choices", None) or [])]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _one_choice(block, value: Any, values: list) -> bool:
    if isinstance(value, bool) and not any(isinstance(v, bool) for v in values):
        return False  # true == 1 in Python: a checkbox's value is not the choice 1
    return value in values


def check_value(block, value: Any, max_chars: int) -> None:
    """Raise InputRefused unless `value` is something `block` itself could send."""
    name = _name(block)
    if value is None:
        if isinstance(block, gr.Number) and (block.value is None or EMPTY_OK in (
                block.elem_classes or [])):
            return  # a box that starts empty, or a guess box (empty = no guess), may be empty
        if isinstance(block, (gr.BrowserState, gr.Dataset, *SERVER_SIDE)):
            return
        if isinstance(block, (*CHOICES, gr.CheckboxGroup)):
            raise InputRefused(f"{name}: choose one of its choices first (nothing was chosen).")
        raise InputRefused(f"{name} needs a value (got nothing).")
    if isinstance(block, gr.Checkbox):
        if not isinstance(value, bool):
            raise InputRefused(f"{name} is a tick box: true or false (got {_shown(value)}).")
    elif isinstance(block, (gr.Number, gr.Slider)):
        if not _is_number(value):
            raise InputRefused(f"{name} must be a number (got {_shown(value)}).")
        if math.isnan(value):
            raise InputRefused(f"{name} must be a number (got NaN).")
        if math.isinf(value):
            raise InputRefused(f"{name} must be a finite number (got {value}).")
    elif isinstance(block, TEXTY):
        if not isinstance(value, str):
            raise InputRefused(f"{name} takes text (got {_shown(value)}).")
        limit = getattr(block, "max_length", None) or max_chars
        if len(value) > limit:
            raise InputRefused(f"{name} is {len(value):,} characters, over this box's limit of "
                               f"{limit:,}. Shorten it and try again.")
    elif isinstance(block, gr.CheckboxGroup):
        values = _choice_values(block)
        if not isinstance(value, list) or not all(_one_choice(block, v, values) for v in value):
            raise InputRefused(f"{name} takes a list of its own choices: "
                               f"{', '.join(map(str, values))} (got {_shown(value)}).")
    elif isinstance(block, CHOICES):
        values = _choice_values(block)
        many = isinstance(block, gr.Dropdown) and block.multiselect
        if getattr(block, "allow_custom_value", False):
            return
        picked = value if many and isinstance(value, list) else [value]
        if (many and not isinstance(value, list)) or not all(
                _one_choice(block, v, values) for v in picked):
            allowed = ", ".join(map(str, values)) or "none yet"
            raise InputRefused(f"{name} must be one of its choices: {allowed} "
                               f"(got {_shown(value)}).")
    elif isinstance(block, gr.Dataset):
        if not _is_number(value) or value != int(value) or not 0 <= value < len(
                block.samples or []):
            raise InputRefused(f"{name}: pick one of its {len(block.samples or [])} examples "
                               f"(got {_shown(value)}).")


def check_inputs(block_fn, inputs: Any, blocks: dict, max_chars: int) -> list:
    """The event's inputs, surrogates cleaned, after every check (raises InputRefused).
    `blocks`: block id -> the session's copy of a component (its updated choices)."""
    if not isinstance(inputs, list):
        raise InputRefused("This request's values must be a list, one per input of the step.")
    wanted = len(block_fn.inputs)
    if len(inputs) != wanted:
        raise InputRefused(f"This step takes {wanted} value{'s' * (wanted != 1)}; the request "
                           f"sent {len(inputs)}. Reload the page and try again.")
    cleaned = []
    for block, value in zip(block_fn.inputs, inputs, strict=True):
        block = blocks.get(block._id, block)
        if not isinstance(block, SERVER_SIDE):
            value = clean_surrogates(value)
            check_value(block, value, max_chars)
        cleaned.append(value)
    return cleaned


def check_every_input(demo: gr.Blocks, max_chars: int) -> None:
    """Check every event's inputs in `demo` before Gradio preprocesses them (call once, after
    the Blocks are built)."""
    preprocess = demo.preprocess_data

    async def checked(block_fn, inputs, state, explicit_call: bool = False):
        # the session's own copies of its components (a dropdown's choices set by a handler)
        session = state.blocks_config.blocks if state is not None else {}
        inputs = check_inputs(block_fn, inputs, session, max_chars)
        return await preprocess(block_fn, inputs, state, explicit_call)

    demo.preprocess_data = checked
