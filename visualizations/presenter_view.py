"""What the presenter shows, as text: the screen in large type, the measured number big, and
the recap of everything measured (read from the dicts kept in the visitor's browser)."""
from __future__ import annotations

import html


def screen_md(screen, index: int, total: int, compact: bool = False) -> str:
    """One screen: where we are, the idea as a heading, the text under it (`compact`: folded)."""
    head = f"<small>Screen {index + 1} of {total}</small>\n\n## {screen.title}"
    if compact:
        return (f"{head}\n\n<details><summary>The screen's text</summary>\n\n{screen.body}"
                "\n\n</details>")
    return f"{head}\n\n{screen.body}"


def result_html(measured: dict | None) -> str:
    if not measured:
        return '<div class="present-result present-empty">Press the button: measured live.</div>'
    esc = {k: html.escape(str(measured.get(k, ""))) for k in ("shown", "label", "detail")}
    return ('<div class="present-result">'
            f'<div class="present-big">{esc["shown"]}</div>'
            f'<div class="present-label">{esc["label"]}</div>'
            f'<div class="present-detail">{esc["detail"]}</div></div>')


def step_html(step) -> str:
    count = f" {step.done} of {step.total}" if step.total else ""
    return ('<div class="present-result present-running" role="status">'
            f'<div class="present-label">⏳ {html.escape(step.counted)}{count}</div>'
            f'<div class="present-detail">{html.escape(step.running)}</div></div>')


def recap_html(figures) -> str:
    cards = []
    for f in figures:
        big = (f'<div class="present-big">{html.escape(f.shown)}</div>' if f.shown is not None
               else '<div class="present-big present-none">—</div>')
        cards.append(f'<div class="present-card"><div class="present-card-name">'
                     f'{html.escape(f.name)}</div>{big}'
                     f'<div class="present-label">{html.escape(f.label)}</div>'
                     f'<div class="present-source">{html.escape(f.source)}</div></div>')
    return f'<div class="present-result present-recap">{"".join(cards)}</div>'
