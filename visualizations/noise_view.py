"""How a measurement's noise is shown: the busy notice, or one quiet line that says how quiet.

Reads a `Noise` record (inference/experiments/noise.py) by attribute. A busy run keeps its
numbers on screen (they were measured) but under the notice, and the caller draws no verdict
from them: `supports_verdict(noise)` is the one check every "faster", "grows" or "bound by"
sentence goes through.
"""
from __future__ import annotations

import html

BUSY = "this machine was busy while measuring: numbers are noisy — run again"


def supports_verdict(noise) -> bool:
    """True unless the run was judged busy (no noise record yet: no verdict either)."""
    return noise is not None and not noise.busy


def withheld(noise) -> str:
    """What stands where a verdict would: the run was busy, or it has not been judged yet."""
    if noise is not None and noise.busy:
        return "no verdict from a busy machine"
    return "the verdict comes when the run has finished"


def busy_notice_html(noise) -> str:
    """The notice for a busy run (empty for a quiet one): one line, the signals that tripped it
    folded under "why?" (a phone keeps the run's button and its chart on one screen)."""
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
    parts = []
    if noise.spread is not None:
        parts.append(f"repeats within {noise.spread:.0%}")
    if noise.calibration_ratio is not None:
        parts.append(f"test product steady ({noise.calibration_ratio:.2f}×)")
    if noise.others_cpu is not None:
        parts.append(f"other programs {noise.others_cpu:.0%} of the CPU")
    return "machine quiet while measuring" + (": " + ", ".join(parts) if parts else "")
