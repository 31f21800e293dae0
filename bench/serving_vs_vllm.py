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
from bench.targets import finish
from inference.experiments.cpu_flags import this_cpu as cpu_name


def main() -> dict:
    t0 = time.perf_counter()
    results: dict = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": cpu_name(),
                     "cores": os.cpu_count()}
    workloads = serving_workloads.measure_workloads(log=print)
    results["serving"] = {"workloads": workloads, **serving_workloads.class_record(workloads)}
    print(json.dumps(workloads, indent=1), flush=True)
    return finish(results, serving_workloads.targets(), t0, "serving-results.json")


if __name__ == "__main__":
    main()
