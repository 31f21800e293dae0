"""The web layer installs its private patches only on the Gradio it was written against."""
from __future__ import annotations

import logging

import gradio as gr

import classroom
from inference.config import Settings


def _small_app() -> gr.Blocks:
    with gr.Blocks() as demo:
        box = gr.Textbox()
        gr.Button("Go").click(lambda s: s, box, box, api_name="go")
    demo.queue(max_size=8)
    return demo


def _fair(settings: Settings) -> classroom.Fairness:
    return classroom.Fairness(settings, classroom.SharedRuns(settings.shared_run_reuse_s))


def test_another_gradio_version_is_refused_with_a_log_line(caplog):
    settings, demo = Settings(), _small_app()
    push, preprocess = demo._queue.push, demo.preprocess_data
    with caplog.at_level(logging.WARNING, logger="classroom"):
        installed = classroom.install(demo, settings, _fair(settings), gradio_version="7.0.0")
    assert installed is False
    assert demo._queue.push == push and demo.preprocess_data == preprocess  # nothing patched
    assert any("7.0.0" in r.getMessage() and classroom.PINNED_GRADIO in r.getMessage()
               for r in caplog.records)
    assert demo.state_session_capacity == settings.sessions_held  # the public cap still holds


def test_the_pinned_version_is_patched():
    settings, demo = Settings(), _small_app()
    push = demo._queue.push
    assert gr.__version__ == classroom.PINNED_GRADIO  # requirements.txt pins what install checks
    assert classroom.install(demo, settings, _fair(settings)) is True
    assert demo._queue.push != push
