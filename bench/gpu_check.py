"""`python -m bench.gpu_check`: is the app correct and fast on CUDA? One run, one JSON file.
The model-level tests, then the GPU's figures with the lessons' own functions (no gradio or plotly
needed), each written to bench/gpu-results.json as soon as known. Without CUDA it exits 2.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch

from bench.targets import ROOT, check, print_targets

# Model-level tests that call a lesson's panel code (plotly/gradio), absent on the GPU machine.
NEEDS_UI = ("tests/test_abuse_engine.py::test_concurrent_steps_on_one_session_take_turns",
            "tests/test_kv_cache.py::test_panel_handlers_on_the_real_model",
            "tests/test_kv_cache.py::test_panel_limits_come_from_settings",
            "tests/test_kv_cache.py::test_panel_errors_are_clear",
            "tests/test_kv_cache.py::test_panel_builds_with_limits_and_named_endpoints")
TARGETS = {  # what a GPU run must reach
    "tests.failed": ("<=", 0),
    "quantization.int8.top1_agreement_decided": (">=", 0.95),
    "quantization.int4-g32.top1_agreement_decided": (">=", 0.95),
    "captured.speedup_vs_eager": (">=", 5),
    "captured.same_tokens": ("==", True),
}


def listed(name: str) -> tuple[str, ...]:
    """The entries of a list file under tests/ (one per line, '#' comments and blanks left out)."""
    lines = (ROOT / "tests" / name).read_text(encoding="utf-8").splitlines()
    return tuple(filter(None, (line.split("#", 1)[0].strip() for line in lines)))


MODEL_TESTS = listed("model_level.txt")  # the Makefile reads these lists too
HALF_PRECISION_DESELECT = listed("half_precision_deselect.txt")


def run_tests(timeout_s: int = 1_500) -> dict:
    """pytest on MODEL_TESTS in a child process, counted from its JUnit report."""
    import xml.etree.ElementTree as ET

    report = ROOT / "bench" / ".gpu-tests.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml",
           str(report), *MODEL_TESTS]
    half = os.environ.get("LLM_LAB_DTYPE", "float16").strip().lower() != "float32"
    skip = list(HALF_PRECISION_DESELECT) if half else []  # CUDA's default dtype is float16
    if not all(importlib.util.find_spec(m) for m in ("gradio", "plotly")):  # the UI's packages
        skip += NEEDS_UI
    cmd += [arg for t in skip for arg in ("--deselect", t)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
    out = {"command": " ".join(cmd[1:]), "returncode": proc.returncode,
           "seconds": time.perf_counter() - t0, "tail": proc.stdout[-3000:] + proc.stderr[-1500:]}
    if report.exists():
        suites = ET.parse(report).getroot()
        suite = suites if suites.tag == "testsuite" else suites[0]
        n = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
        out.update(passed=n["tests"] - n["failures"] - n["errors"] - n["skipped"],
                   failed=n["failures"] + n["errors"], skipped=n["skipped"],
                   failures=[c.get("classname", "") + "::" + c.get("name", "")
                             for c in suite.iter("testcase")
                             if c.find("failure") is not None or c.find("error") is not None])
        report.unlink()
    return out


def captured_vs_eager(lm, ids: list[int], new_tokens: int = 128) -> dict:
    """The eager greedy loop against the captured static-cache step, at batch 1."""
    from inference.experiments.roofline import captured_race

    race = captured_race(lm, ids, new_tokens)
    return vars(race) | {"speedup_vs_eager": race.speedup,
                         "eager_static_cache_tokens_per_s": race.static_tokens_per_s}


def bench_sections(lm) -> dict:
    from bench import measure
    from inference.experiments import roofline
    from inference.tokens import prompt_ids

    ids = prompt_ids(lm.tokenizer, measure.PROMPT)
    return {
        "decode": lambda: measure.decode(lm, ids, roofline.measure_read_bandwidth(lm.device)),
        # "This machine"'s own measurement; its race is the "captured" section, run once
        "step_profile": lambda: roofline.step_figures(
            roofline.measure_step_bound(lm, ids, race_tokens=0)),
        "prefill": lambda: measure.prefill_speeds(lm, (16, 1024)),
        "kv_cache": lambda: measure.kv_cache_race(lm, prompt_ids(lm.tokenizer, measure.KV_PROMPT)),
        "batching": lambda: measure.batch_sweep(lm, ids),
        "captured": lambda: captured_vs_eager(lm, ids),
        "quantization": lambda: measure.quantization(lm, measure.QUALITY_PROMPT),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--skip-bench", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "bench" / "gpu-results.json"))
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print(f"No CUDA device here (torch {torch.__version__}, CUDA build: "
              f"{torch.version.cuda or 'none'}). bench.gpu_check measures the app on a GPU: run "
              "it on a machine with one (see README, 'On a GPU').", file=sys.stderr)
        return 2
    out = Path(args.out)
    results: dict = {"when": time.strftime("%Y-%m-%d %H:%M:%S"),
                     "machine": {"device": torch.cuda.get_device_name(0),
                                 "torch": torch.__version__, "cuda": torch.version.cuda,
                                 "dtype_env": os.environ.get("LLM_LAB_DTYPE", "")}}

    def record(name: str, fn) -> None:
        print(f"== {name} ({time.strftime('%H:%M:%S')})", flush=True)
        t0 = time.perf_counter()
        try:
            results[name] = fn()
        except Exception as exc:  # recorded, and the next section still runs
            results[name] = {"error": f"{type(exc).__name__}: {exc}",
                             "traceback": traceback.format_exc()[-2000:]}
        print(json.dumps(results[name], default=str)[:1500], f"({time.perf_counter() - t0:.0f} s)",
              flush=True)
        results["targets"] = check(results, TARGETS)
        out.write_text(json.dumps(results, indent=2, default=str))

    if not args.skip_tests:
        record("tests", run_tests)
    if not args.skip_bench:
        from inference.loading import load_model

        lm = load_model()
        results["machine"].update(dtype=lm.info.dtype, model_source=lm.info.source,
                                  load_seconds=lm.info.load_seconds)
        for name, fn in bench_sections(lm).items():
            record(name, fn)
    print_targets(results.get("targets", {}))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
