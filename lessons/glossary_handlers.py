"""The Glossary tab's handlers: every term the lessons use, defined once."""
from __future__ import annotations

from visualizations.glossary import glossary_md

__all__ = ["glossary_md"]  # the tab's one view: no model run, no state
