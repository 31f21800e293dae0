"""The two web-stack costs removed per visitor (classroom/web_costs.py), on the real Gradio.

A new session's block configs are built lazily and read back equal to Gradio's eager ones (a
deep link reads them all); an event's update reaches the lazy dict as Gradio's own code writes
it; Gradio's per-call `import matplotlib` fails at once when Matplotlib is absent."""
from __future__ import annotations

import importlib.util
import sys

import gradio as gr
import pytest
from gradio import state_holder, utils

from classroom import web_costs


def small_blocks() -> gr.Blocks:
    with gr.Blocks() as demo:
        box = gr.Textbox("hello", label="Prompt")
        out = gr.Markdown("*nothing yet*")
        gr.Slider(1, 10, 3, label="n")
        gr.Button("Go").click(lambda s: s.upper(), box, out)
    return demo


def test_a_new_session_builds_no_config_until_one_is_read(monkeypatch):
    demo = small_blocks()
    eager = web_costs._GRADIO_INIT.__get__  # Gradio's own __init__, kept by web_costs
    reference = object.__new__(state_holder.SessionState)
    eager(reference)(demo)
    web_costs.lazy_session_configs()
    assert state_holder.SessionState.__init__ is web_costs._lazy_init
    built = []
    real = type(demo.default_config).config_for_block

    def counted(*args, **kwargs):
        built.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(type(demo.default_config), "config_for_block", staticmethod(counted))
    lazy = state_holder.SessionState(demo)
    assert built == [] and len(lazy.config_values) == len(reference.config_values)
    first = next(iter(reference.config_values))
    assert first in lazy.config_values and lazy.config_values[first] == \
        reference.config_values[first] and built == [first]
    # a deep link reads them all: the same configs as Gradio's eager ones
    assert dict(lazy.config_values.items()) == reference.config_values
    assert list(lazy.components) == list(reference.components)


def test_an_update_lands_in_the_lazy_configs_as_in_gradios():
    demo = small_blocks()
    web_costs.lazy_session_configs()
    lazy = state_holder.SessionState(demo)
    key = next(k for k, b in demo.blocks.items() if isinstance(b, gr.Markdown))
    lazy._update_value_in_config(key, "**done**")
    assert lazy.config_values[key]["props"]["value"] == "**done**"
    with pytest.raises(KeyError):
        lazy.config_values[10**9]  # no such block: as a plain dict


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is not None,
                    reason="Matplotlib is installed: Gradio's import finds it at once")
def test_gradios_per_call_matplotlib_import_fails_at_once_when_absent(monkeypatch):
    monkeypatch.delitem(sys.modules, "matplotlib", raising=False)
    web_costs.no_matplotlib_search()
    assert sys.modules["matplotlib"] is None
    with pytest.raises(ImportError):
        import matplotlib  # noqa: F401
    with utils.MatplotlibBackendMananger():  # Gradio's own wrapper around each call
        pass


def test_the_queue_looks_for_work_every_poll_s_not_every_millisecond():
    demo = small_blocks()
    demo.queue()
    assert demo._queue.sleep_when_free <= 0.001  # Gradio's own (the attribute still exists)
    web_costs.calm_queue(demo, 0.02)
    assert demo._queue.sleep_when_free == 0.02
    assert demo._queue.progress_update_sleep_when_free == web_costs.PROGRESS_POLL_S


def test_the_app_runs_with_all_three(app_module):
    from classroom.web_costs import _lazy_init

    assert state_holder.SessionState.__init__ is _lazy_init
    assert app_module.demo._queue.sleep_when_free == app_module.SETTINGS.queue_poll_s
    if importlib.util.find_spec("matplotlib") is None:
        assert sys.modules.get("matplotlib", "absent") is None
