"""bench.gpu_check imports without the UI packages and, without CUDA, says so and exits 2."""
import os
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


def _run(args, env_extra):
    env = {**os.environ, **env_extra}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def test_gpu_check_imports_no_ui_packages():
    code = ("import sys, bench.gpu_check as g; "
            "bad = [m for m in ('gradio', 'plotly', 'lessons', 'visualizations') "
            "if m in sys.modules]; assert not bad, bad; print(len(g.MODEL_TESTS))")
    proc = _run(["-c", code], {})
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout.strip()) >= 6


def test_gpu_check_without_cuda_exits_2_with_a_clear_message(tmp_path):
    out = tmp_path / "gpu-results.json"
    proc = _run(["-m", "bench.gpu_check", "--out", str(out)], {"CUDA_VISIBLE_DEVICES": ""})
    if torch.cuda.is_available() and proc.returncode != 2:  # a GPU the variable did not hide
        return
    assert proc.returncode == 2
    assert "No CUDA device" in proc.stderr and "GPU" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()
