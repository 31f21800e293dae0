"""`make bench-serving`: only the class-serving comparison of `make bench`, the app's
continuous batcher against one row at a time and against vLLM, same clients, same prompts,
same machine, one run (the full bench takes much longer; this is the part the server is judged
on). Writes bench/serving-results.json with the same keys as `make bench`'s `serving`.
Run it with nothing else busy on the machine: both servers share its cores."""
from __future__ import annotations

import json
import os
import time

from bench import classroom, serving, visitor_memory, vllm_peer
from bench.app_server import ROOT
from bench.run import TARGETS, cpu_name
from bench.targets import check


def main() -> dict:
    t0 = time.perf_counter()
    results: dict = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": cpu_name(),
                     "cores": os.cpu_count()}
    print("== serving: the app's continuous batcher vs one row at a time", flush=True)
    results["serving"] = serving.serving_race()
    print(json.dumps(results["serving"], indent=1), flush=True)
    print("== serving: the same class served by vLLM", flush=True)
    results["serving"]["vllm"] = vllm_peer.vllm_class(log=print)
    results["serving"].update(vllm_peer.app_vs_vllm(results["serving"]["batched"],
                                                    results["serving"]["vllm"]))
    results["targets"] = check(results, {  # not measured here: paged, classroom, memory
        k: t for k, t in TARGETS.items() if k.startswith("serving.")
        and not k.startswith("serving.paged") and k not in classroom.TARGETS
        and k not in visitor_memory.TARGETS})
    results["bench_seconds"] = time.perf_counter() - t0
    return results


if __name__ == "__main__":
    res = main()
    (ROOT / "bench" / "serving-results.json").write_text(json.dumps(res, indent=2))
    for key, t in res["targets"].items():
        print(f"{key:44s} {t['value']!s:>12s}  {t['target']:8s} "
              f"{'met' if t['met'] else 'MISSED'}")
    print("wrote bench/serving-results.json")
