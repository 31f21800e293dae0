"""The bench's targets, checked in one place: a dotted key into the results, `>=` or `<=` a goal.

>>> check({"a": {"b": 2.0}}, {"a.b": (">=", 1), "a.c": ("<=", 0)})["a.b"]
{'value': 2.0, 'target': '>= 1', 'met': True}
"""
from __future__ import annotations

Targets = dict[str, tuple[str, float]]  # dotted key -> (">=" or "<=", goal)


def dotted_value(results: dict, dotted: str):
    """`results["a"]["b"]` for "a.b"; None where a part is missing."""
    cur = results
    for part in dotted.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


def check(results: dict, targets: Targets) -> dict:
    """{key: {"value", "target", "met"}}: a missing value is not met."""
    out = {}
    for key, (op, goal) in targets.items():
        v = dotted_value(results, key)
        ok = v is not None and (v >= goal if op == ">=" else v <= goal)
        out[key] = {"value": v, "target": f"{op} {goal}", "met": ok}
    return out
