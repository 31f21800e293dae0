"""The work budget of every measurement: each event of the heavy lane is a declared
`Measurement` with its work, its page's own settings and the largest it offers fit the budget,
and a request beyond them is refused with a sentence before any pass.

The measurements are read from the built app (`measurement_wiring.declared`), so a heavy
button wired any other way fails here. A request is checked as the queue checks it when it
joins: the values its handler would get (`classroom_guard.handler_values`), then
`Measurement.over_budget`; no measurement runs there. The last test runs four small
measurements and counts the tokens their forward passes feed."""
from __future__ import annotations

import itertools
import time

import gradio as gr
import pytest

from classroom.classroom_guard import call_args, handler_values
from lessons.common.measurement import HEAVY, OVER_BUDGET
from lessons.common.measurement_wiring import declared

SECOND = 1.0  # a refusal comes back within this (it tokenizes, and runs nothing)


def heavy(demo) -> list:
    """Every event of the heavy lane that runs Python (the measurements)."""
    return [fn for fn in demo.fns.values() if fn.concurrency_id == HEAVY and fn.fn is not None]


def measurement(app, fn):
    return declared(app.demo)[fn.api_name][1]


def args(app, fn, inputs: list) -> list:
    """The arguments `fn`'s handler gets for these sent values (no session: State defaults)."""
    values = handler_values(app.demo, fn, inputs, None, app.SETTINGS.max_prompt_chars)
    assert values is not None, (fn.api_name, inputs)
    return call_args(fn, values)


def allowed(app, fn) -> int:
    return measurement(app, fn).budget or app.SETTINGS.measure_work_tokens


def default(block):
    """What the block's own page sends before anyone touches it."""
    value = block.value() if callable(block.value) else block.value
    if isinstance(block, (gr.Dropdown, gr.Radio)) and value is None and block.choices:
        return block.choices[0][1]
    return value


def offered(block, screens: int) -> list:
    """Every value of `block` its page offers that can change the work: a slider's ends, each
    choice, all boxes ticked, every presenter screen (Next reaches each); a typed box or a
    guess keeps its page's value."""
    own = default(block)
    if isinstance(block, gr.Slider):
        return [own, block.minimum, block.maximum]
    if isinstance(block, (gr.Dropdown, gr.Radio)):
        return [value for _, value in block.choices]
    if isinstance(block, gr.CheckboxGroup):
        return [own, [value for _, value in block.choices]]
    if isinstance(block, gr.BrowserState):
        return [{**block.default_value, "screen": i} for i in range(screens)]
    return [own]


def estimate(app, fn, inputs: list) -> int:
    return int(measurement(app, fn).work(*args(app, fn, inputs)))


def largest_offered(app, fn) -> tuple[int, list]:
    """(the most work of any combination the page offers, those inputs)."""
    from lessons.common.predictions import load_screens

    screens = len(load_screens(app.LM.info))
    grid = itertools.product(*(offered(b, screens) for b in fn.inputs))
    return max(((estimate(app, fn, list(inputs)), list(inputs)) for inputs in grid),
               key=lambda pair: pair[0])


def test_budget_every_heavy_endpoint_is_a_declared_measurement(app_module):
    names = [fn.api_name for fn in heavy(app_module.demo)]
    assert len(names) >= 16 and len(set(names)) == len(names)  # the whole app, named
    wired = {name for name, (_, m) in declared(app_module.demo).items() if m.lane == HEAVY}
    assert set(names) == wired, "a heavy button not wire_measurement's"


@pytest.mark.parametrize("which", ["defaults", "largest offered"])
def test_budget_lessons_own_settings_are_never_refused(app_module, which):
    """Each heavy endpoint's page values, and the largest combination its controls offer, fit
    its budget: the estimate is a count (it does not fail) and the join check lets it in."""
    app, over = app_module, []
    for fn in heavy(app.demo):
        if which == "defaults":
            inputs = [default(b) for b in fn.inputs]
            tokens = estimate(app, fn, inputs)
        else:
            tokens, inputs = largest_offered(app, fn)
        budget = allowed(app, fn)
        assert tokens >= 0
        refused = measurement(app, fn).over_budget(app.SETTINGS, *args(app, fn, inputs))
        if tokens > budget or refused is not None:
            over.append(f"{fn.api_name}: {tokens:,} tokens > {budget:,} for {inputs}")
    assert not over, "\n".join(over)


def _long(sentence: str, tokens: int, lm) -> str:
    """`sentence` repeated to about `tokens` tokens (no chat template counted)."""
    one = len(lm.tokenizer(sentence, add_special_tokens=False)["input_ids"])
    return sentence * (tokens // one)


def _over_budget_inputs(lm) -> dict[str, list]:
    """Requests the input check lets through (each box within its limits) that no page offers."""
    prompt = _long("The museum opens at nine and closes at five. ", 3_000, lm)
    system = _long("Tickets cost twelve euros for adults. ", 3_600, lm)
    questions = "\n".join(f"Question {i}: when does it close?" for i in range(8))
    return {"speculative_sweep": [prompt, 256],
            "speculative_batch": [prompt, 8, None],
            "kv_prefix": [system, questions, 64]}


@pytest.mark.parametrize("api_name", ["speculative_sweep", "speculative_batch", "kv_prefix"])
def test_budget_over_budget_request_refused_with_a_sentence_before_any_pass(app_module,
                                                                           api_name):
    app = app_module
    fn = next(f for f in heavy(app.demo) if f.api_name == api_name)
    inputs = _over_budget_inputs(app.LM)[api_name]
    passes = []
    hook = app.LM.model.register_forward_pre_hook(lambda *a: passes.append(1))
    try:
        start = time.perf_counter()
        refusal = measurement(app, fn).over_budget(app.SETTINGS, *args(app, fn, inputs))
        took = time.perf_counter() - start
    finally:
        hook.remove()
    budget, tokens = allowed(app, fn), estimate(app, fn, inputs)
    assert tokens > budget
    assert refusal == OVER_BUDGET.format(work=tokens, budget=budget)
    assert f"at most {budget:,}" in refusal and refusal.endswith(".")
    assert not passes and took < SECOND


def test_budget_estimates_count_the_tokens_a_run_feeds(app_module):
    """Four small runs through the lessons' own handlers, every forward pass's tokens counted:
    equal to the estimate where the run's passes are fixed (the prefill sweep, the quantization
    comparison), at most it where they depend on the answer (speculative race) or on the
    machine (the KV race's warm-up, timed at two thread counts on a CPU with several)."""
    from inference.experiments.shared_results import SharedResults
    from lessons import (
        kv_cache_handlers,
        prefill_handlers,
        quantization_handlers,
        speculative_handlers,
    )

    app, shared = app_module, SharedResults()
    lm, settings = app.LM, app.SETTINGS
    prompt = "Name a colour."
    runs = {
        "kv_race": ([prompt, 4, None],
                    lambda: kv_cache_handlers.race_frames(lm, settings, prompt, 4)),
        "prefill_sweep": ([[8, 32], 8, None],
                          lambda: prefill_handlers.run_prefill_sweep(lm, settings, None,
                                                                     [8, 32], 8)),
        "quant_compare": ([prompt, ["fp32"], 8, None],
                          lambda: quantization_handlers.compare_frames(lm, settings, shared,
                                                                       prompt, ["fp32"], 8)),
        "speculative_race": ([prompt, "prompt_lookup", 2, 8, None],
                             lambda: speculative_handlers.run_spec_race(
                                 lm, settings, None, prompt, "prompt_lookup", 2, 8)),
    }
    fed = [0]

    def count(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        fed[0] += int(ids.numel())
    hook = lm.model.register_forward_pre_hook(count, with_kwargs=True)
    try:
        for api_name, (inputs, run) in runs.items():
            fn = next(f for f in heavy(app.demo) if f.api_name == api_name)
            fed[0] = 0
            for _ in run():
                pass
            expected = estimate(app, fn, inputs)
            if api_name in ("speculative_race", "kv_race"):
                assert 0 < fed[0] <= expected, (api_name, fed[0], expected)
            else:
                assert fed[0] == expected, (api_name, fed[0], expected)
    finally:
        hook.remove()
