"""Every worked example in the code's docstrings (`>>>`) runs: a module that gains one is
found here, so an example cannot drift from the function it shows."""
from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("inference", "lessons", "visualizations", "classroom", "bench")
WITH_EXAMPLES = sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts)
    for package in PACKAGES for path in (ROOT / package).rglob("*.py")
    if ">>> " in path.read_text(encoding="utf-8"))


def test_the_examples_are_found():
    assert {"inference.stats", "lessons.common.measurement", "classroom.visitor_token"} \
        <= set(WITH_EXAMPLES)


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_the_worked_examples_hold(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0, result
