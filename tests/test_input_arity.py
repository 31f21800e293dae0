"""Every endpoint answers a malformed request with a sentence: wrong arity, wrong
types, NaN, None, lone surrogates, text over its box's limit. The endpoints are read from the
built app (`app.demo.fns`), so an endpoint added tomorrow is covered without editing this file.

Each request goes through the app's own processing path up to the handler
(`demo.preprocess_data`, the step Gradio's queue runs for every event, where
`classroom.input_check` sits), in process: no handler runs, so the whole sweep over every
endpoint takes seconds. The running app answering one such request is in test_bad_input.py."""
from __future__ import annotations

import asyncio
import math
import re

import gradio as gr
import pytest
from gradio.state_holder import SessionState

from classroom.input_check import InputRefused

LEAK = re.compile(r"Traceback|File \"|\.py\b|/work/|site-packages|<class|Error\b")
CHECKED = (gr.Textbox, gr.Number, gr.Slider, gr.Checkbox, gr.CheckboxGroup, gr.Dropdown,
           gr.Radio, gr.Dataset)


def endpoints(demo) -> list:
    """Every registered event that runs Python (JS-only events take no request)."""
    return [fn for fn in demo.fns.values() if fn.fn is not None]


def label(fn) -> str:
    return fn.api_name or f"{fn.name}#{fn._id}"


def good_value(block):
    """What the block's own page would send before anyone touches it."""
    if isinstance(block, gr.Dataset):
        return 0
    value = block.value() if callable(block.value) else block.value
    if isinstance(block, (gr.Dropdown, gr.Radio)) and value is None and block.choices:
        return block.choices[0][1]
    return value


def good_inputs(fn) -> list:
    return [good_value(b) for b in fn.inputs]


def refusal(demo, fn, inputs) -> str | None:
    """The sentence `inputs` are refused with before the handler (None if accepted)."""
    try:
        asyncio.run(demo.preprocess_data(fn, inputs, SessionState(demo)))
    except InputRefused as exc:
        return exc.message
    except gr.Error as exc:  # Gradio's own range checks: also a sentence, also checked
        return exc.message
    return None


def is_sentence(message: str | None) -> bool:
    return bool(message) and message.rstrip().endswith((".", ")")) and not LEAK.search(
        message) and len(message.split()) >= 4


def wrong_values(block) -> list:
    """Values `block` can never send."""
    if isinstance(block, gr.Checkbox):
        return ["yes", 5, [1], {"on": True}]
    if isinstance(block, (gr.Number, gr.Slider)):
        return ["abc", True, [1], math.inf]
    if isinstance(block, gr.Textbox):
        return [5, ["text"], {"text": "hi"}]
    if isinstance(block, gr.CheckboxGroup):
        return ["1", [object.__name__], 7]
    if isinstance(block, (gr.Dropdown, gr.Radio)):
        return ["no such choice", [1, 2], {"x": 1}]
    return [{"x": 1}, "abc"]  # a Dataset: an example's index


def collect(demo, make_cases) -> list[str]:
    """Run every (endpoint, inputs) case; the ones not refused with a sentence."""
    bad = []
    for fn in endpoints(demo):
        for what, inputs in make_cases(fn):
            message = refusal(demo, fn, inputs)
            if not is_sentence(message):
                bad.append(f"{label(fn)} {what}: {message!r}")
    return bad


def arity_cases(fn):
    good = good_inputs(fn)
    yield "one extra value", [*good, "extra"]
    if good:
        yield "one value short", good[:-1]
    yield "not a list", "abc"


def type_cases(fn):
    good = good_inputs(fn)
    for i, block in enumerate(fn.inputs):
        if isinstance(block, CHECKED):
            for wrong in wrong_values(block):
                yield f"input {i} ({block.label}) = {wrong!r}", [*good[:i], wrong, *good[i + 1:]]


def nan_cases(fn):
    good = good_inputs(fn)
    for i, block in enumerate(fn.inputs):
        if isinstance(block, (gr.Number, gr.Slider)):
            yield f"input {i} ({block.label}) = NaN", [*good[:i], math.nan, *good[i + 1:]]


def none_cases(fn):
    good = good_inputs(fn)
    for i, block in enumerate(fn.inputs):
        empty_ok = isinstance(block, gr.Number) and (block.value is None or "lab-guess" in (
            block.elem_classes or []))
        if isinstance(block, CHECKED) and not isinstance(block, gr.Dataset) and not empty_ok:
            yield f"input {i} ({block.label}) = None", [*good[:i], None, *good[i + 1:]]


@pytest.mark.parametrize("cases", [arity_cases, type_cases, nan_cases, none_cases],
                         ids=["arity", "types", "nan", "none"])
def test_arity_types_nan_none_on_every_endpoint_get_a_sentence(app_module, cases):
    demo = app_module.demo
    assert len(endpoints(demo)) > 50  # the whole app, not a stub
    bad = collect(demo, cases)
    assert not bad, "\n".join(bad[:40])


def test_arity_defaults_are_accepted(app_module):
    """The checks refuse only what is wrong: each endpoint's own page values pass."""
    demo = app_module.demo
    ready = [fn for fn in endpoints(demo)  # a dropdown filled by a step has nothing to send yet
             if not any(isinstance(b, gr.Dropdown) and not b.choices for b in fn.inputs)]
    refused = [f"{label(fn)}: {refusal(demo, fn, good_inputs(fn))}" for fn in ready
               if refusal(demo, fn, good_inputs(fn)) is not None]
    assert not refused, "\n".join(refused)


def test_arity_lone_surrogates_cleaned_and_text_limit_enforced(app_module):
    demo = app_module.demo
    limit = app_module.SETTINGS.max_prompt_chars
    texts = 0
    for fn in endpoints(demo):
        for i, block in enumerate(fn.inputs):
            if not isinstance(block, gr.Textbox):
                continue
            texts += 1
            good = good_inputs(fn)
            nasty = [*good[:i], "Say \ud800hi\udfff", *good[i + 1:]]
            processed = asyncio.run(demo.preprocess_data(fn, nasty, SessionState(demo)))
            assert processed[i] == "Say ?hi?", (label(fn), processed[i])
            huge = [*good[:i], "a" * (limit + 1), *good[i + 1:]]
            message = refusal(demo, fn, huge)
            assert is_sentence(message) and f"{limit:,}" in message, (label(fn), message)
    assert texts >= 10  # every prompt box of every lesson
