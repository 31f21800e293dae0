"""Headline cards: the one number a class must read from the back row, large, with a label
above and a short note below (measured, theoretical, or shared), as plain HTML for a
`gr.Markdown`; the header card, the presenter's screens, and the number formats and markdown
table every lesson's text shares."""
from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

WAITING = "—"  # the value of a card whose number is not measured yet
SAME_WITHIN = 1.1  # a time ratio within 10% of 1 is "about the same": a run's steps vary that much


def ratio_side(ratio: float) -> str:
    """"faster" above SAME_WITHIN, "slower" below 1 / SAME_WITHIN, else "same".

    >>> ratio_side(1.3), ratio_side(1.1), ratio_side(0.95), ratio_side(0.8)
    ('faster', 'same', 'same', 'slower')
    """
    return ("faster" if ratio > SAME_WITHIN else "slower" if ratio < 1 / SAME_WITHIN else "same")


@dataclass(frozen=True)
class Card:
    label: str  # what the number is, e.g. "With the KV cache"
    value: str  # the number with its unit, e.g. "2.41 s"
    note: str = ""  # how it was obtained, e.g. "measured, 32 tokens"


def cards_html(cards: list[Card]) -> str:
    """A row of cards that wraps on a phone; a blank line after it so markdown follows."""
    def one(c: Card) -> str:
        note = f"<span class='lab-big-note'>{html.escape(c.note)}</span>" if c.note else ""
        return (f"<div class='lab-big'><span class='lab-big-label'>{html.escape(c.label)}</span>"
                f"<span class='lab-big-value'>{html.escape(c.value)}</span>{note}</div>")
    return "<div class='lab-cards'>" + "".join(one(c) for c in cards) + "</div>\n\n"


def ms(seconds: float, digits: int = 1) -> str:
    """Seconds in milliseconds, as a table or a diagram shows them: 12.3 ms, 1,234.5 ms."""
    return f"{seconds * 1000:,.{digits}f} ms"


def times(x: float) -> str:
    """A speed-up as a card shows it: 16×, 3.4×, 0.82×."""
    return f"{x:.0f}×" if x >= 10 else f"{x:.1f}×" if x >= 1 else f"{x:.2f}×"


def md_table(header: str, rows: Iterable[Sequence]) -> str:
    """A markdown table: `header` ("batch | weights | ..."), a rule under each of its columns,
    then one line per row of cells."""
    def line(cells: Sequence) -> str:
        return "|" + "".join(f" {cell} |" for cell in cells)
    columns = header.split(" | ")
    return "\n".join([line(columns), "|" + "---|" * len(columns), *map(line, rows)])


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KB' (decimal units, as memory bandwidth is quoted)."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def model_card_html(info) -> str:
    """The header card for a ModelInfo (name, source, device, dtype, threads, ...)."""
    items = [
        ("Model", info.name), ("Source", info.source), ("Device", info.device),
        ("Weights dtype", info.dtype), ("CPU threads", str(info.threads)),
        ("Parameters", f"{info.parameters / 1e6:.1f} M"),
        ("Weight size", human_bytes(info.weight_bytes)),
        ("Shape", f"{info.layers} layers · {info.heads} query heads · {info.kv_heads} KV heads "
                  f"· head dim {info.head_dim}")]
    cells = "".join(f"<div class='lab-card-item'><span>{html.escape(k)}</span>"
                    f"<b>{html.escape(v)}</b></div>" for k, v in items)
    note = f"<div class='lab-card-note'>⚠ {html.escape(info.note)}</div>" if info.note else ""
    reason = getattr(info, "dtype_reason", "")
    because = reason.split(": ", 1)[-1]
    why = (f"<div class='lab-card-why'><b>Why {html.escape(info.dtype)}?</b> "
           f"{html.escape(because[:1].upper() + because[1:])}</div>" if reason else "")
    return f"<div class='lab-card'>{cells}</div>{why}{note}"


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
    return (f'<div class="present-result"><div class="present-big">{esc["shown"]}</div>'
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
