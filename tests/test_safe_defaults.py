"""Safe by default: loopback only, no share link, bounded queue and work, no stack traces shown,
and nothing in the page or API lets a visitor choose a file or a model."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import psutil
import pytest

FILE_COMPONENTS = {"file", "uploadbutton", "fileexplorer", "image", "imageeditor", "audio",
                   "video", "model3d", "gallery", "simpleimage"}


@pytest.fixture(scope="module")
def page_config(server) -> dict:
    with urllib.request.urlopen(server.url + "config", timeout=30) as r:
        return json.load(r)


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_server_listens_on_loopback_only(server):
    listening = [c.laddr for c in psutil.Process(server.pid).net_connections("inet")
                 if c.status == psutil.CONN_LISTEN]
    assert listening and all(addr.ip == "127.0.0.1" for addr in listening), listening


def test_launch_defaults_and_the_override(app_module, monkeypatch):
    monkeypatch.delenv("GRADIO_SERVER_NAME", raising=False)
    opts = app_module.launch_options()
    assert opts["server_name"] == "127.0.0.1"
    assert opts["share"] is False and opts["show_error"] is False
    assert "server_port" not in opts  # Spaces and GRADIO_SERVER_PORT choose the port
    monkeypatch.setenv("GRADIO_SERVER_NAME", "0.0.0.0")  # how a Space (or a teacher) exposes it
    assert app_module.launch_options()["server_name"] == "0.0.0.0"


def test_no_share_link(server, page_config):
    assert page_config["show_error"] is False
    assert "gradio.live" not in server.log_tail(20_000)


def test_queue_is_bounded_and_model_work_is_limited(app_module):
    demo = app_module.demo
    assert demo._queue.max_size is not None and 0 < demo._queue.max_size <= 256
    fns = list(demo.fns.values())
    model = [f for f in fns if f.concurrency_id == "model"]
    heavy = [f for f in fns if f.concurrency_id == "heavy"]
    assert model and heavy
    for f in model + heavy:
        assert f.time_limit is not None and f.time_limit <= 1800, f.api_name
    # a sweep can never take more than one worker from the short requests: the measurement
    # line starts one at a time (its waiting presses only show their place)
    assert app_module.RUNS.line.slots == app_module.SETTINGS.heavy_lane_limit == 1
    for f in heavy:
        assert f.concurrency_limit is None, f.api_name  # the line decides, not Gradio's lane


def test_nothing_lets_a_visitor_choose_a_file_or_a_model(server, page_config):
    kinds = {c["type"] for c in page_config["components"]}
    assert not kinds & FILE_COMPONENTS, kinds & FILE_COMPONENTS
    for c in page_config["components"]:
        props = c.get("props", {})
        label = str(props.get("label") or "").lower()
        if c["type"] in ("textbox", "dropdown"):
            assert not any(w in label for w in ("model", "path", "file", "folder")), label
        if c["type"] == "dropdown":
            for choice in props.get("choices") or []:
                assert "/" not in str(choice[0] if isinstance(choice, list) else choice)
    for path in ["gradio_api/file=/etc/passwd", "gradio_api/file=app.py",
                 f"gradio_api/file={server.log_path}"]:
        assert http_status(server.url + path) in (403, 404), path


def test_unexpected_errors_carry_no_stack_trace():
    from lessons.common.feedback import user_error

    err = user_error(RuntimeError("boom in /work/main/inference/engine.py line 42"))
    message = str(err.message)
    assert message.startswith("Something went wrong") and "Try again" in message
    assert "/work/" not in message and "line 42" not in message and "boom" not in message
    assert "RuntimeError" not in message  # no class names either


def test_typed_errors_reach_the_learner_as_written():
    from inference.errors import PromptTooLongError
    from lessons.common.feedback import user_error

    err = user_error(PromptTooLongError("Your prompt is 9,000 tokens; the limit is 4,096."))
    assert str(err.message) == "Your prompt is 9,000 tokens; the limit is 4,096."
