"""The Glossary tab, the plain part: every term the lessons use, defined once
(`visualizations.glossary`)."""
from __future__ import annotations

from visualizations.glossary import glossary_md


def glossary_text() -> str:
    """The whole glossary as markdown."""
    return glossary_md()
