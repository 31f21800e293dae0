"""How a measurement's noise is shown: the busy notice, a line saying how quiet a run was, and
beside a busy run this machine's quiet reference. A busy run keeps its numbers but draws no
verdict: `supports_verdict(noise)` is the one check every "faster" or "bound by" goes through."""
from __future__ import annotations

import html
from collections.abc import Callable

from .cards import Card, cards_html, times

BUSY = "this machine was busy while measuring: numbers are noisy — run again"


def supports_verdict(noise) -> bool:
    """True unless the run was judged busy (no noise record yet: no verdict either)."""
    return noise is not None and not noise.busy


def withheld(noise) -> str:
    """What stands where a verdict would: the run was busy, or it has not been judged yet."""
    return ("no verdict from a busy machine" if noise is not None and noise.busy else
            "the verdict comes when the run has finished")


def busy_notice_html(noise) -> str:
    """The notice for a busy run (empty for a quiet one), its reasons folded under "why?"."""
    if noise is None or not noise.busy:
        return ""
    why = "; ".join(noise.reasons)
    return (f"<div class='lab-busy' role='status'><details><summary>⚠️ "
            f"<b>{html.escape(BUSY.capitalize())}</b> <span class='lab-busy-more'>why?</span>"
            f"</summary><span class='lab-busy-why'>{html.escape(why)}</span></details></div>\n\n")


def quiet_note(noise) -> str:
    """'machine quiet while measuring: repeats within 4%, other programs 2% of the CPU'."""
    if noise is None or noise.busy:
        return ""
    parts = [said.format(value) for value, said in (
        (noise.spread, "repeats within {:.0%}"),
        (noise.calibration_ratio, "test product steady ({:.2f}×)"),
        (noise.others_cpu, "other programs {:.0%} of the CPU")) if value is not None]
    return "machine quiet while measuring" + (": " + ", ".join(parts) if parts else "")


def reference_card(reference, title: str, noise, now=None,
                   shown: Callable[[float], str] = times) -> Card | None:
    """The quiet reference as a card for a busy run with one on file (else None)."""
    if reference is None or noise is None or not noise.busy:
        return None
    return Card(f"{title}, quiet", shown(reference.value),
                f"measured on this machine at {reference.when(now)}, quiet")


def reference_html(reference, title: str, live: str, noise, now=None,
                   shown: Callable[[float], str] = times) -> str:
    """For a busy run with a reference on file: its card, then this run's figure `live`."""
    card = reference_card(reference, title, noise, now, shown)
    if card is None:
        return ""
    why = "; ".join(noise.reasons) or "the machine was busy"
    return (cards_html([card])
            + f"<small class='lab-live-beside'>This run, busy: {html.escape(live)}. It differs "
              f"from the quiet figure because {html.escape(why)}.</small>\n\n")
