"""The bench's targets, checked in one place (a dotted key into the results, `>=`, `<=` or `==`
a goal), and `finish`, how every bench run ends.

>>> check({"a": {"b": 2.0}}, {"a.b": (">=", 1), "a.c": ("<=", 0)})["a.b"]
{'value': 2.0, 'target': '>= 1', 'met': True}
"""
from __future__ import annotations

import json
import operator
import time

from bench.workloads import ROOT

Targets = dict[str, tuple[str, float]]  # dotted key -> (">=", "<=" or "==", goal)
OPS = {">=": operator.ge, "<=": operator.le, "==": operator.eq}


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


def finish(results: dict, targets: Targets, started: float, name: str) -> dict:
    results["targets"] = check(results, targets)
    results["bench_seconds"] = time.perf_counter() - started
    (ROOT / "bench" / name).write_text(json.dumps(results, indent=2))
    print_targets(results["targets"])
    print(f"wrote bench/{name}")
    return results
