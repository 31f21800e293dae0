"""How every bench run ends (`finish`): its targets checked (a dotted key into the results, `>=`,
`<=` or `==` a goal), its results written, and README's "What to expect" table (`table`) from one
run on one machine, "not measured in this run" where it lacks a figure (never an older one).
`python -m bench.targets [results.json]` rewrites the table by hand.

>>> check({"a": {"b": 2.0}}, {"a.b": (">=", 1), "a.c": ("<=", 0)})["a.b"]
{'value': 2.0, 'target': '>= 1', 'met': True}
"""
from __future__ import annotations

import json
import operator
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

Targets = dict[str, tuple[str, float]]  # dotted key -> (">=", "<=" or "==", goal)
OPS = {">=": operator.ge, "<=": operator.le, "==": operator.eq}
BEGIN, END = "<!-- bench-table:begin -->", "<!-- bench-table:end -->"
MISSING = "not measured in this run"


def dotted_value(results: dict, dotted: str):
    cur = results
    for part in dotted.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


def check(results: dict, targets: Targets) -> dict:
    """{key: {"value", "target", "met"}}: a missing value (or a whole section) is not met."""
    out = {}
    for key, (op, goal) in targets.items():
        v = dotted_value(results, key)
        ok = v is not None and not isinstance(v, dict) and OPS[op](v, goal)
        out[key] = {"value": v, "target": f"{op} {goal}", "met": bool(ok)}
    return out


def print_targets(checked: dict) -> None:
    width = max(map(len, checked), default=0)
    for key, t in checked.items():
        v = t["value"]
        shown = f"{v:.3f}" if isinstance(v, float) else str(v)[:12]
        print(f"{key:{width}s} {shown:>12s}  {t['target']:8s} {'met' if t['met'] else 'MISSED'}")


def announce(title: str) -> None:
    print(f"== {title} ({time.strftime('%H:%M:%S')})", flush=True)


def finish(results: dict, targets: Targets, started: float, name: str) -> dict:
    results["targets"] = check(results, targets)
    results["bench_seconds"] = time.perf_counter() - started
    (ROOT / "bench" / name).write_text(json.dumps(results, indent=2))
    print_targets(results["targets"])
    print(f"wrote bench/{name}")
    return results


def run_alone(name: str, targets: Targets, serving: Callable[[], dict], **record) -> dict:
    """One bench part run alone: `record`'s keys, then its figures under `serving` (printed),
    checked and written to bench/`name`."""
    started = time.perf_counter()
    results = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), **record, "serving": serving()}
    print(json.dumps(results["serving"], indent=1), flush=True)
    return finish(results, targets, started, name)


def _decode(r: dict) -> str:
    d = r["decode"]
    roof = d.get("roofline_tokens_per_s")
    tail = f"; ceiling {roof:.1f} (theoretical: bandwidth ÷ bytes per token)" if roof else ""
    return f"{d['engine_tokens_per_s']:.1f} / {d['generate_tokens_per_s']:.1f} tokens/s{tail}"


def _prefill(r: dict) -> str:
    longest = max(r["prefill"], key=lambda row: row["tokens"])
    return (f"{longest['tokens']:,} tokens in {longest['seconds']:.2f} s "
            f"({longest['tokens_per_s']:.0f} tokens/s)")


def _kv(r: dict) -> str:
    kv = r["kv_cache"]
    same = "same tokens" if kv.get("same_tokens") else "tokens differ"
    return f"{kv['speedup']:.2f}× faster over {kv.get('new_tokens')} new tokens, {same}"


def _batching(r: dict) -> str:
    one, *_, top = r["batching"]["sizes"]  # at least two sizes
    return (f"batch {top['batch']}: {top['tokens_per_s']:.1f} tokens/s against "
            f"{one['tokens_per_s']:.1f} at batch {one['batch']} "
            f"({top['tokens_per_s'] / one['tokens_per_s']:.1f}×)")


def _schedulers(r: dict) -> str:
    c, s = r["batching"]["schedulers"]["continuous"], r["batching"]["schedulers"]["static"]
    return (f"{c['throughput_tokens_per_s']:.1f} / {s['throughput_tokens_per_s']:.1f} tokens/s, "
            f"mean first token {c['mean_ttft_s']:.1f} / {s['mean_ttft_s']:.1f} s")


def _quantization(r: dict) -> str:
    return " / ".join(f"{name} {r['quantization'][name]['decode_tokens_per_s']:.1f}"
                      for name in ("fp32", "int8", "int4-g32")) + " tokens/s"


def _startup(r: dict) -> str:
    return f"{r['startup']['warm_seconds']:.0f} s / {r['startup']['cold_seconds']:.0f} s"


def _class(r: dict) -> str:
    b, s = r["serving"]["batched"], r["serving"]["serial"]
    return (f"{b['tokens_per_s']:.1f} / {s['tokens_per_s']:.1f} tokens/s, "
            f"p95 latency {b['p95_latency_s']:.1f} / {s['p95_latency_s']:.1f} s")


def _workload(w: dict) -> str:
    app, vllm = w.get("app") or {}, w.get("vllm")
    mine = (f"{app.get('tokens_per_s', 0):.1f} tokens/s, p95 latency "
            f"{app.get('p95_latency_s') or 0:.1f} s, p95 first token "
            f"{app.get('p95_ttft_s') or 0:.1f} s, {app.get('errors', 0)} errors")
    if not vllm:
        return f"{mine}; vLLM not run ({w.get('vllm_reason', 'no reason recorded')})"
    return (f"{mine}; vLLM {vllm['tokens_per_s']:.1f} tokens/s, p95 "
            f"{vllm.get('p95_latency_s') or 0:.1f} / {vllm.get('p95_ttft_s') or 0:.1f} s, "
            f"{vllm.get('errors', 0)} errors (throughput "
            f"{w.get('app_vs_vllm_throughput') or 0:.2f}× vLLM's)")


ROWS: tuple[tuple[str, Callable[[dict], str]], ...] = (  # a row raises where the run lacks it
    ("decode, batch 1 (engine / `generate()`)", _decode),
    ("prefill, the longest prompt measured", _prefill),
    ("KV cache against recomputing every step", _kv),
    ("batching: the largest batch against batch 1", _batching),
    ("continuous / static batching (10-request trace)", _schedulers),
    ("decode by weight format", _quantization),
    ("start-up, weights cached / cold", _startup),
    ("30 streaming chats: continuous batcher / one row at a time", _class),
)


def _measured(row: Callable[[dict], str], results: dict) -> str:
    try:
        return row(results)
    except (KeyError, IndexError, TypeError, ValueError):  # a figure this run lacks
        return MISSING


def table(results: dict) -> str:
    machine = results.get("machine", {})
    lines = [f"Measured by `make bench` on {machine.get('device', 'an unnamed machine')}, "
             f"{machine.get('dtype', 'unknown dtype')}, {results.get('when', 'undated')} "
             "(one run, one machine):", "", "| figure | measured |", "|---|---|"]
    lines += [f"| {label} | {_measured(row, results)} |" for label, row in ROWS]
    workloads = dotted_value(results, "serving.workloads") or {}
    lines += [f"| serving `{name}`: this app; vLLM on the same machine | {_workload(w)} |"
              for name, w in workloads.items()]
    return "\n".join(lines)


def write_readme(results: dict, readme: Path = ROOT / "README.md") -> bool:
    """Replace the table between the README's markers; False (README untouched) without them."""
    text = readme.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        return False
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    readme.write_text(f"{head}{BEGIN}\n{table(results)}\n{END}{tail}", encoding="utf-8")
    return True


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bench" / "results.json"
    wrote = write_readme(json.loads(path.read_text(encoding="utf-8")))
    print("README table rewritten" if wrote else "README has no bench-table markers")
