"""One place for limits: every slider and bounded number box in the app is built from a
`Settings` Range (lessons/controls.py), with exactly that Range's bounds and step, and the
engine's own check (`Range.check`, `inference.errors.check_range`) refuses what the control
would not offer, with a message that names the setting.

A control whose bounds come from the model or from the run, not from Settings, must be named
in MODEL_BOUNDED below, and its bounds are checked against the model instead.
"""
import math

import gradio as gr
import pytest

from inference.config import Range, Settings
from inference.errors import SettingOutOfRangeError, check_range

# elem_id -> what bounds it: these three are the only controls not built from a Range.
MODEL_BOUNDED = {
    "kv-attn-layer": "layers",  # attention map: layer 0 .. layers - 1
    "kv-attn-head": "heads",  # attention map: query head 0 .. heads - 1
    "decode-branch-step": "generated",  # Branch: a step of the run so far (set as it grows)
}
# Ranges whose default is a marker computed at run time, not a value in low..high.
COMPUTED_DEFAULTS = {"memory_budget_mb": 0}  # 0 = half of the memory free at start-up


def limit_name(component) -> str | None:
    """The Settings range a control was built from (lessons.common.controls tags it
    `limit-<name>`; None for controls not built from one)."""
    for c in getattr(component, "elem_classes", None) or []:
        if c.startswith("limit-"):
            return c[len("limit-"):]
    return None


def bounded_controls(demo: gr.Blocks) -> list:
    """Every slider, and every number box that has a minimum or a maximum."""
    return [b for b in demo.blocks.values()
            if isinstance(b, gr.Slider)
            or (isinstance(b, gr.Number) and (b.minimum is not None or b.maximum is not None))]


def describe(c) -> str:
    return f"{type(c).__name__} {c.label!r} (elem_id {c.elem_id!r})"


def test_every_slider_and_bounded_number_is_a_settings_range(app_module):
    ranges = app_module.SETTINGS.ranges()
    info = app_module.LM.info
    controls = bounded_controls(app_module.demo)
    assert len(controls) >= 20, "the walk found too few controls to be looking at the app"
    model_bounded, problems = {}, []
    for c in controls:
        if c.elem_id in MODEL_BOUNDED:
            model_bounded[c.elem_id] = c
            continue
        name = limit_name(c)
        if name is None:
            problems.append(f"{describe(c)}: not built from Settings (no limit-<name> class)")
            continue
        if name not in ranges:
            problems.append(f"{describe(c)}: limit-{name} is not a Range of Settings")
            continue
        rng = ranges[name]
        shown = (c.minimum, c.maximum, c.step)
        if shown != (rng.low, rng.high, rng.step):
            problems.append(f"{describe(c)}: min/max/step {shown} but Settings.{name} is "
                            f"{(rng.low, rng.high, rng.step)}")
        value = c.value
        if isinstance(value, (int, float)) and not rng.low <= value <= rng.high:
            problems.append(f"{describe(c)}: starts at {value}, outside Settings.{name}")
    assert problems == [], "\n".join(problems)

    assert set(model_bounded) == set(MODEL_BOUNDED), "an allow-listed control is gone or renamed"
    layer, head = model_bounded["kv-attn-layer"], model_bounded["kv-attn-head"]
    assert (layer.minimum, layer.maximum, layer.step) == (0, info.layers - 1, 1)
    assert (head.minimum, head.maximum, head.step) == (0, info.heads - 1, 1)
    assert limit_name(layer) is None and limit_name(head) is None
    branch = model_bounded["decode-branch-step"]  # before any token: nothing to branch from
    assert branch.minimum == 0 and branch.step == 1
    assert branch.maximum <= app_module.SETTINGS.new_tokens.high


def test_every_range_is_well_formed():
    for name, rng in Settings().ranges().items():
        assert rng.low < rng.high and rng.step > 0, name
        if name in COMPUTED_DEFAULTS:
            assert rng.default == COMPUTED_DEFAULTS[name], name
        else:
            assert rng.low <= rng.default <= rng.high, f"{name}: default {rng.default} outside"
        steps = (rng.high - rng.low) / rng.step  # the slider can reach its maximum
        assert math.isclose(steps, round(steps), abs_tol=1e-6), f"{name}: {steps} steps"


def test_range_check_accepts_its_bounds():
    rng = Range(1, 8, 4)
    for ok in (1, 8, 4, 1.0, 7.5):
        rng.check("Batch size", ok)  # no error


@pytest.mark.parametrize("bad", [0, 9, -1e9, 1e18, 0.999, 8.001, float("nan"), float("inf"),
                                 float("-inf"), True, False, "5", None, [4]])
def test_range_check_refuses_with_the_settings_name(bad):
    with pytest.raises(SettingOutOfRangeError, match=r"^Batch size must be") as info:
        Range(1, 8, 4).check("Batch size", bad)
    message = str(info.value)
    assert "1" in message and "8" in message, message  # the allowed range is stated


def test_check_range_messages():
    check_range("Top-p", 0.05, 0.05, 1)
    check_range("Top-p", 1, 0.05, 1)
    with pytest.raises(SettingOutOfRangeError,
                       match=r"^Top-p must be between 0.05 and 1 \(got 1.5\)\.$"):
        check_range("Top-p", 1.5, 0.05, 1)
    with pytest.raises(SettingOutOfRangeError, match=r"^Seed must be between 0 and 10 \(got -1\)"):
        check_range("Seed", -1, 0, 10)
    with pytest.raises(SettingOutOfRangeError, match=r"^Temperature must be between 0 and 2"):
        check_range("Temperature", float("nan"), 0, 2)
    for not_a_number in ("abc", True, None):
        with pytest.raises(SettingOutOfRangeError,
                           match=r"^Seed must be a number between 0 and 10\.$"):
            check_range("Seed", not_a_number, 0, 10)
    assert issubclass(SettingOutOfRangeError, ValueError)  # callers may catch ValueError


def test_engine_checks_read_the_same_ranges():
    """A value just past a Range is refused by the engine with that Range's bounds: the
    limit the slider shows is the limit the server enforces."""
    from inference.sampling import SamplingSettings

    limits = Settings()
    for field, name in (("temperature", "Temperature"), ("top_p", "Top-p"), ("top_k", "Top-k")):
        rng = getattr(limits, field)
        SamplingSettings(**{field: rng.high})  # the slider's maximum is accepted
        with pytest.raises(SettingOutOfRangeError, match=name):
            SamplingSettings(**{field: rng.high + rng.step})
        with pytest.raises(SettingOutOfRangeError, match=name):
            SamplingSettings(**{field: rng.low - rng.step})


def test_pileup_env_shortens_held_cache_and_session_lifetimes(monkeypatch):
    """bench/visitor_memory.py watches visitors' memory expire in minutes, not an hour."""
    default = Settings()
    for env in ("LLM_LAB_HELD_IDLE_S", "LLM_LAB_STATE_TTL_S", "LLM_LAB_HELD_MB"):
        monkeypatch.delenv(env, raising=False)
    assert (Settings.from_env().held_idle_s, Settings.from_env().state_ttl_s) \
        == (default.held_idle_s, default.state_ttl_s)
    monkeypatch.setenv("LLM_LAB_HELD_IDLE_S", "20")
    monkeypatch.setenv("LLM_LAB_STATE_TTL_S", " 30 ")
    monkeypatch.setenv("LLM_LAB_HELD_MB", "100")
    got = Settings.from_env()
    assert (got.held_idle_s, got.state_ttl_s, got.held_cache_mb) == (20, 30, 100)
    monkeypatch.setenv("LLM_LAB_STATE_TTL_S", "soon")  # not a whole number: the default
    monkeypatch.setenv("LLM_LAB_HELD_IDLE_S", "0")  # at least a second
    got = Settings.from_env()
    assert (got.state_ttl_s, got.held_idle_s) == (default.state_ttl_s, 1)
