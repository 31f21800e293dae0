"""The quiet reference beside a busy live run: the figure this machine gives when nothing else
runs, big, and this run's figure small beside it, with why the two differ.

Reads a `QuietFigure` (inference/experiments/quiet_reference.py) and a `Noise` by attribute. A
quiet live run, or a machine with no quiet run on file yet, shows nothing here: the live
figure with its spread stands alone.
"""
from __future__ import annotations

import html

from .cards import Card, cards_html, times


def reference_html(reference, title: str, live: str, noise, now=None) -> str:
    """For a busy live run with a reference on file: a card with the reference ("measured on
    this machine at 09:12, quiet"), then this run's figure `live` in small type with the reasons
    the noise rule gave. '' otherwise. `title`: what the figure is ("The cache's speed-up")."""
    card = reference_card(reference, title, noise, now)
    if card is None:
        return ""
    why = "; ".join(noise.reasons) or "the machine was busy"
    return (cards_html([card])
            + f"<small class='lab-live-beside'>This run, busy: {html.escape(live)}. It differs "
              f"from the quiet figure because {html.escape(why)}.</small>\n\n")


def reference_card(reference, title: str, noise, now=None) -> Card | None:
    """The quiet reference as one card, for a busy live run with one on file (else None): a
    view whose cards must keep one row (lesson 5's, above its chart) sets it beside them."""
    if reference is None or noise is None or not noise.busy:
        return None
    return Card(f"{title}, quiet", times(reference.value),
                f"measured on this machine at {reference.when(now)}, quiet")
