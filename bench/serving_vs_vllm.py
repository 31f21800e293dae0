"""`make bench-serving`: only the serving workloads of `make bench` (bench/serving_workloads.py),
four shapes of class served by the app and by vLLM, same prompts, same client, same machine,
one run (the full bench takes much longer; this is the part the server is judged on). Writes
bench/serving-results.json with the same keys as `make bench`'s `serving.workloads`, and the
30 x 48 class as `serving.batched` / `serving.vllm` (what the app's serving-peer card reads).
Run it with nothing else busy on the machine: both servers share its cores."""
from __future__ import annotations

import json
import os
import time

from bench import serving_workloads
from bench.app_server import ROOT
from bench.targets import check
from inference.experiments.cpu_flags import this_cpu as cpu_name


def main() -> dict:
    t0 = time.perf_counter()
    results: dict = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": cpu_name(),
                     "cores": os.cpu_count()}
    workloads = serving_workloads.measure_workloads(log=print)
    results["serving"] = {"workloads": workloads, **serving_workloads.class_record(workloads)}
    print(json.dumps(workloads, indent=1), flush=True)
    results["targets"] = check(results, serving_workloads.targets())
    results["bench_seconds"] = time.perf_counter() - t0
    return results


if __name__ == "__main__":
    res = main()
    (ROOT / "bench" / "serving-results.json").write_text(json.dumps(res, indent=2))
    for key, t in res["targets"].items():
        print(f"{key:60s} {t['value']!s:>12s}  {t['target']:8s} "
              f"{'met' if t['met'] else 'MISSED'}")
    print("wrote bench/serving-results.json")
