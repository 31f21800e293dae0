"""The Glossary tab's handlers: every term the lessons use, defined once."""
from __future__ import annotations

from visualizations.glossary import glossary_md


def glossary_text() -> str:
    return glossary_md()
