"""Every `module.name` the code reads from one of its own modules exists. Splitting a module
in two (a sweep and its theory) leaves callers that read the moved names through the old
alias; Python finds out only when that line runs, and some lines run only in `make bench`
(a full bench once stopped at `context_sweep.fit_quadratic`, moved to context_theory.py)."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("inference", "lessons", "visualizations", "classroom", "bench")
FILES = sorted([p for package in PACKAGES for p in (ROOT / package).rglob("*.py")]
               + [ROOT / "app.py"])


def _modules_named(tree: ast.Module, package: str) -> dict[str, str]:
    """Local name -> the project module it was imported as (`import a.b as x`,
    `from a import b`, `from . import b`)."""
    named = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            named |= {a.asname or a.name: a.name for a in node.names
                      if a.name.split(".")[0] in PACKAGES}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            if base.split(".")[0] not in PACKAGES:
                continue
            for a in node.names:
                try:
                    importlib.import_module(f"{base}.{a.name}")
                except ImportError:
                    continue  # a function or class, not a module
                named[a.asname or a.name] = f"{base}.{a.name}"
    return named


def test_every_module_attribute_read_exists():
    missing = []
    for path in FILES:
        rel = path.relative_to(ROOT)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        named = _modules_named(tree, ".".join(rel.with_suffix("").parts[:-1]))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in named
                    and not hasattr(importlib.import_module(named[node.value.id]), node.attr)):
                missing.append(f"{rel}:{node.lineno} {named[node.value.id]}.{node.attr}")
    assert not missing, missing
