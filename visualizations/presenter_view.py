"""What the presenter shows, as text: the screen in large type, the measured number big, and
the recap of everything measured. Pure: reads records by attribute (screens) or by key (the
measurements kept in the visitor's browser as dicts); never runs a model."""
from __future__ import annotations

import html


def screen_md(screen, index: int, total: int) -> str:
    """One screen: where we are, the idea as a heading, the short text under it."""
    return f"<small>Screen {index + 1} of {total}</small>\n\n## {screen.title}\n\n{screen.body}"


def result_html(measured: dict | None, waiting: str = "Press the button: measured live.") -> str:
    """The headline number, big, with what it is and the figures behind it."""
    if not measured:
        return f'<div class="present-result present-empty">{html.escape(waiting)}</div>'
    esc = {k: html.escape(str(measured.get(k, ""))) for k in ("shown", "label", "detail")}
    return ('<div class="present-result">'
            f'<div class="present-big">{esc["shown"]}</div>'
            f'<div class="present-label">{esc["label"]}</div>'
            f'<div class="present-detail">{esc["detail"]}</div></div>')


def step_html(step) -> str:
    """A long measurement while it runs: "⏳ decode step 5 of 23" big enough to read from the
    back, and the figure measured so far under it (`step`: a `presenter_handlers.Step`)."""
    return ('<div class="present-result present-running" role="status">'
            f'<div class="present-label">⏳ {html.escape(step.counted)} {step.done} of '
            f'{step.total}</div>'
            f'<div class="present-detail">{html.escape(step.running)}</div></div>')


def recap_md(screens, results: dict[str, dict]) -> str:
    """A table of every headline measured so far, in the order of the screens."""
    rows = [f"| {s.title} | **{results[s.measure]['shown']}** {results[s.measure]['label']} |"
            for s in screens if s.measure in results]
    if not rows:
        return "*Nothing measured yet: go back and press the buttons.*"
    return "| Screen | Measured here |\n|---|---|\n" + "\n".join(rows)
