"""The layout's finer rules, read from the source with `ast` (no module is imported to check
it): what each folder may import, and that every tab is one `TABS` entry and two files.
`../shared/tools/import_graph.py` checks the broad layering; these are the rules it leaves out.

Each rule collects its violations and the test asserts the list is empty, printing them; the
planted-violation tests run the same checker on a small made-up tree, so a checker that
cannot fail would fail there.
"""
from __future__ import annotations

import ast
from pathlib import Path

from lessons import TABS

ROOT = Path(__file__).resolve().parent.parent
# Engine modules that run (or load, or serve) a model: a chart that imported one could call it.
MODEL_RUNNERS = ("torch", "inference.loading", "inference.engine", "inference.generation",
                 "inference.server", "inference.paged_batch",
                 "inference.kv_cache", "inference.quantize",
                 "inference.profile_step",
                 "inference.compute_thread", "inference.experiments")
UI = ("gradio", "plotly")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path) -> set[str]:
    """Every module `path` imports (relative imports resolved; `from a import b` gives both
    `a` and `a.b`, since b may be a module)."""
    name = module_name(path, root)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names)
    return {m for m in found if m}


def sources(root: Path) -> dict[str, Path]:
    """Module name -> file, for the project's own packages and app.py."""
    files = [p for d in ("inference", "lessons", "visualizations", "bench")
             for p in (root / d).rglob("*.py")] + [root / "app.py"]
    return {module_name(p, root): p for p in files if p.exists()}


def is_under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def reached(start: str, mods: dict[str, Path], root: Path) -> set[str]:
    """Every module `start` imports, directly or through the project's own modules."""
    seen, todo = set(), [start]
    while todo:
        for m in imports(mods[todo.pop()], root):
            if m not in seen:
                seen.add(m)
                if m in mods:
                    todo.append(m)
    return seen


def is_tab_module(module: str) -> bool:
    leaf = module.rsplit(".", 1)[-1]
    return module.startswith("lessons.") and leaf.endswith(("_panel", "_handlers"))


def violations(root: Path, tabs=TABS) -> list[str]:
    """Every break of the layout's rules under `root`, one line each."""
    mods = sources(root)
    out: list[str] = []
    for name, path in sorted(mods.items()):
        direct = imports(path, root)
        if name.startswith("lessons.") and name.endswith("_handlers"):
            bad = sorted(m for m in reached(name, mods, root) if is_under(m, ("gradio",)))
            out += [f"{name} reaches {m} (handlers are plain: no Gradio)" for m in bad]
        if name.startswith("lessons.common."):
            bad = sorted(m for m in direct if is_tab_module(m))
            out += [f"{name} imports the tab module {m} (common knows no lesson)" for m in bad]
        if name.startswith("visualizations."):
            bad = sorted(m for m in direct if is_under(m, MODEL_RUNNERS + ("gradio", "lessons")))
            out += [f"{name} imports {m} (visualizations draw records, call no model)"
                    for m in bad]
        if name.startswith("inference.") and not name.startswith("inference.experiments"):
            bad = sorted(m for m in direct if is_under(
                m, ("inference.experiments", "lessons", "visualizations", "bench") + UI))
            out += [f"{name} imports {m} (the engine imports no experiment or UI)" for m in bad]
        if name.startswith("inference.experiments"):
            bad = sorted(m for m in direct if is_under(m, ("lessons", "visualizations") + UI))
            out += [f"{name} imports {m} (experiments measure; no UI)" for m in bad]
    for tab in tabs:
        for module in (tab.panel, tab.handlers):
            if module not in mods:
                out.append(f"tab {tab.id!r}: no {module.replace('.', '/')}.py")
        if tab.panel in mods and not any(
                isinstance(n, ast.FunctionDef) and n.name == "build"
                for n in ast.parse(mods[tab.panel].read_text(encoding="utf-8")).body):
            out.append(f"tab {tab.id!r}: {tab.panel} has no build()")
        if tab.next is not None and tab.next not in {t.id for t in tabs}:
            out.append(f"tab {tab.id!r}: its next tab {tab.next!r} is not in TABS")
    listed = {t.module for t in tabs}
    for name in mods:
        leaf = name.rsplit(".", 1)[-1]
        if name.count(".") == 1 and name.startswith("lessons.") and leaf.endswith("_panel") \
                and leaf.removesuffix("_panel") not in listed:
            out.append(f"{name} is a panel no TABS entry names")
    if "app" in mods:
        app = mods["app"]
        bad = sorted(m for m in imports(app, root) if is_tab_module(m))
        out += [f"app.py imports {m} (it builds tabs only from lessons.TABS)" for m in bad]
        for node in ast.walk(ast.parse(app.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "Tab" and any(
                    isinstance(a, ast.Constant) for a in [*node.args, *(k.value for k in
                                                                        node.keywords)]):
                out.append(f"app.py line {node.lineno}: a gr.Tab written by hand (use TABS)")
    return out


def test_the_project_keeps_its_layout():
    found = violations(ROOT)
    assert found == [], "\n".join(found)


def test_every_tab_id_used_in_links_is_listed():
    # Browser tests and teachers' links use these ids (?lesson=kv): renaming one breaks them.
    assert [t.id for t in TABS] == ["start", "chat", "tokens", "prefill", "decode",
                                   "speculative", "kv", "pages", "context", "batching",
                                   "quantization", "machine", "present", "glossary"]
    assert len({t.module for t in TABS}) == len(TABS)


def _plant(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


CLEAN_TREE = {
    "lessons/__init__.py": "",
    "lessons/common/__init__.py": "",
    "lessons/common/feedback.py": "import gradio as gr\n",
    "lessons/common/guess.py": "X = 1\n",
    "lessons/demo_panel.py": "import gradio as gr\nfrom .demo_handlers import f\n\n\n"
                             "def build(ctx):\n    pass\n",
    "lessons/demo_handlers.py": "from .common.guess import X\n\n\ndef f():\n    return X\n",
    "inference/__init__.py": "",
    "inference/engine.py": "import torch\n",
    "visualizations/__init__.py": "",
    "visualizations/charts.py": "import plotly.graph_objects as go\n",
    "app.py": "from lessons import TABS\n",
}


def _tabs():
    from lessons import Tab
    return (Tab("demo", "Demo", "demo"),)


def test_a_clean_made_up_tree_passes(tmp_path):
    assert violations(_plant(tmp_path, CLEAN_TREE), _tabs()) == []


def test_the_checker_catches_each_planted_violation(tmp_path):
    planted = {
        # a handler reaching Gradio through a common module
        "lessons/common/guess.py": "import gradio as gr\n",
        # common importing a tab
        "lessons/common/feedback.py": "from ..demo_panel import build\n",
        # a chart importing the engine, and the engine importing an experiment and plotly
        "visualizations/charts.py": "from inference.engine import prefill\n",
        "inference/engine.py": "from .experiments.kv_race import race\nimport plotly\n",
        # a panel no tab lists, and a tab written by hand in app.py
        "lessons/orphan_panel.py": "def build(ctx):\n    pass\n",
        "app.py": "import gradio as gr\nfrom lessons import demo_panel\n"
                  "with gr.Blocks():\n    gr.Tab('Demo', id='demo')\n",
    }
    found = violations(_plant(tmp_path, {**CLEAN_TREE, **planted}), _tabs())
    text = "\n".join(found)
    assert "lessons.demo_handlers reaches gradio" in text
    assert "lessons.common.feedback imports the tab module lessons.demo_panel" in text
    assert "visualizations.charts imports inference.engine" in text
    assert "inference.engine imports inference.experiments.kv_race" in text
    assert "inference.engine imports plotly" in text
    assert "lessons.orphan_panel is a panel no TABS entry names" in text
    assert "app.py imports lessons.demo_panel" in text
    assert "a gr.Tab written by hand" in text


def test_a_tab_without_its_two_files_is_caught(tmp_path):
    from lessons import Tab
    tree = {k: v for k, v in CLEAN_TREE.items() if k != "lessons/demo_handlers.py"}
    tree["lessons/demo_panel.py"] = "import gradio as gr\n\n\ndef layout():\n    pass\n"
    found = violations(_plant(tmp_path, tree), (Tab("demo", "Demo", "demo", next="nowhere"),))
    assert "tab 'demo': no lessons/demo_handlers.py" in found
    assert "tab 'demo': lessons.demo_panel has no build()" in found
    assert "tab 'demo': its next tab 'nowhere' is not in TABS" in found


def test_the_model_level_lists_name_real_tests():
    """One list of model-level tests (tests/model_level.txt), read by the Makefile and the GPU
    check through bench/gpu_check.py: every entry must be a test file (or test) that exists."""
    from bench.gpu_check import HALF_PRECISION_DESELECT, MODEL_TESTS

    assert len(MODEL_TESTS) >= 6
    for entry in MODEL_TESTS + HALF_PRECISION_DESELECT:
        path, _, test = entry.partition("::")
        assert (ROOT / path).is_file(), entry
        assert not test or f"def {test}(" in (ROOT / path).read_text(encoding="utf-8"), entry
    assert all(e.partition("::")[0] in MODEL_TESTS for e in HALF_PRECISION_DESELECT)
