"""Lesson text lives in assets/ as markdown, written for this app."""
from __future__ import annotations

import os

ASSETS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets")


def lesson_text(name: str) -> str:
    """The markdown of assets/<name>."""
    with open(os.path.join(ASSETS, name), encoding="utf-8") as f:
        return f.read()
