"""One lane of the mechanism diagram as SVG, and its CSS (no script): one forward pass (a beat)
whose fed tokens climb the layer groups, each reading its KV strip and appending the new cells,
the chosen token joining the output. A beat lasts `--measured` (its seconds) × `--slow` (the
speed buttons); a shape starts at `--at` × beat and lasts `--for` × beat. Replay swaps each
animation for a copy under another name, Pause sets `animation-play-state`; reduced motion shows
each shape's end state (`assets/mechanism.css`)."""
from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from .style import PALETTE
from .token_view import shown_piece

_BASE = (Path(__file__).resolve().parent.parent / "assets" / "mechanism.css").read_text(
    encoding="utf-8")
FACTORS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)  # the slow-downs on offer
PROMPT_COLOUR = PALETTE["blue"]  # cached positions of the prompt
GENERATED_COLOUR = PALETTE["orange"]  # cached positions of generated tokens
LIT_COLOUR = PALETTE["yellow"]  # a layer group working on the tokens
READ_COLOUR = PALETTE["vermillion"]  # the cache being read
RECOMPUTE_COLOUR = PALETTE["vermillion"]  # tokens fed again because nothing was kept
PREFILL, DECODE, RECOMPUTE = "prefill", "decode", "recompute"
WIDTH = 1000  # the SVG's user units across
STACK_X, STACK_W = 250, 190  # the layer stack
STRIP_X, STRIP_W = 460, 520  # the KV strips
CLIMB_START, CLIMB_END = 0.08, 0.86  # the wavefront's share of the beat
MAX_CHIPS = 12  # input and output chips shown (the rest counted)
MAX_ROWS_DRAWN = 8  # a batched pass's rows drawn as bars in its block (the rest in its label)

_KEYFRAMES = {
    "climb": "from { transform: translateY(0); opacity: 1; } "
             "92% { opacity: 1; } to { transform: translateY(var(--rise)); opacity: 0; }",
    "lit": f"0% {{ fill: #e9e9e9; }} 25% {{ fill: {LIT_COLOUR}; }} 100% {{ fill: #e9e9e9; }}",
    "read": "0% { opacity: 0; } 30% { opacity: 1; } 100% { opacity: 0; }",
    "appear": "from { opacity: 0; } to { opacity: 1; }",
    "clock": "from { transform: scaleX(0); } to { transform: scaleX(1); }"}


def mechanism_css() -> str:
    """The diagram's stylesheet (inlined in each diagram, so it stands alone)."""
    rules = [_BASE]
    for name, frames in _KEYFRAMES.items():
        rules.append(f"@keyframes mech-{name} {{ {frames} }}")
        rules.append(f"@keyframes mech-{name}-again {{ {frames} }}")
        rules.append(f".mech-do-{name} {{ animation-name: mech-{name}; }}")
        rules.append(f".mech-replay:checked ~ .mech-stage .mech-do-{name} "
                     f"{{ animation-name: mech-{name}-again; }}")
    for f in FACTORS:
        rules.append(f".mech-s{f}:checked ~ .mech-stage {{ --slow: {f}; }}")
        rules.append(f".mech-s{f}:checked ~ .mech-controls .mech-say-{f} {{ display: inline; }}")
        rules.append(f".mech-s{f}:checked ~ .mech-controls .mech-speed-{f} "
                     "{ background: #111111; color: #ffffff; }")
    return "\n".join(rules)


@dataclass(frozen=True)
class Lane:
    """One forward pass to draw: what went in, what the cache held after it, how long it took."""

    title: str  # e.g. "with the KV cache"
    kind: str  # PREFILL, DECODE or RECOMPUTE
    fed: tuple[str, ...] = ()  # the tokens this pass processed (their text); none: an empty lane
    prompt_cells: int = 0  # cached positions of the prompt after the pass
    generated_cells: int = 0  # cached positions of generated tokens after the pass
    new_cells: int = 0  # positions this pass appended to every strip (0 without a cache)
    output: tuple[str, ...] = ()  # output tokens after the pass, the chosen one last
    seconds: float = 0.0  # measured duration of the pass (seconds)
    uses_cache: bool = True
    rows: int = 0  # a batch's requests (lesson 5), one token each; 0: one request's pass
    weights: str = ""  # what the pass read of the weights, e.g. "weights read once: 538 MB"

    @property
    def cached(self) -> int:
        return self.prompt_cells + self.generated_cells


@dataclass(frozen=True)
class Frame:
    """Where a lane is drawn and the scales lanes share."""

    y: int  # top of the lane
    row_h: int  # height of one layer group
    groups: tuple[tuple[int, int], ...]  # (first layer, last layer), 1-based, bottom first
    capacity: int  # positions a strip holds at full width
    uid: str  # prefix for ids, unique in the page
    longest_s: float  # the longest lane's measured seconds: its clock bar is the full width

    @property
    def cell_w(self) -> float:
        return STRIP_W / max(self.capacity, 1)

    @property
    def clock_scale(self) -> float:  # user units per measured second
        return (WIDTH - STACK_X - 120) / self.longest_s if self.longest_s > 0 else 0.0

    @property
    def stack_top(self) -> int:
        return self.y + 44

    @property
    def stack_bottom(self) -> int:
        return self.stack_top + self.row_h * len(self.groups)

    @property
    def height(self) -> int:
        return self.stack_bottom - self.y + 78


def chip_label(text: str, most: int = 12) -> str:
    shown = shown_piece(text)
    return shown if len(shown) <= most else shown[:most - 1] + "…"


def anim(name: str, at: float, length: float, style: str = "") -> str:
    """class and style attributes for a shape animated from `at` for `length` of the beat."""
    return (f"class='mech-anim mech-do-{name}' style='--at:{at:.4f};--for:{length:.4f}{style}'")


def patterns(uid: str, cell_w: float, row_h: int) -> str:
    """One pattern per kind of cell: a coloured square with a white gap, one per position."""
    gap = 1.5 if cell_w >= 4 else 0
    return "<defs>" + "".join(
        f"<pattern id='{uid}-{kind}' x='{STRIP_X}' y='0' width='{cell_w:.3f}' height='{row_h}' "
        f"patternUnits='userSpaceOnUse'><rect width='{max(cell_w - gap, 0.5):.3f}' "
        f"height='{row_h}' fill='{colour}'/></pattern>"
        for kind, colour in (("p", PROMPT_COLOUR), ("g", GENERATED_COLOUR))) + "</defs>"


def _runs(lane: Lane) -> list[tuple[int, int, str, bool]]:
    """(first position, count, 'p' or 'g', new this pass) runs along a strip."""
    before = lane.cached - lane.new_cells
    old_p = min(before, lane.prompt_cells)
    spans = [(0, old_p, "p", False), (old_p, before - old_p, "g", False),
             (before, lane.prompt_cells - old_p, "p", True),
             (before + lane.prompt_cells - old_p, lane.new_cells - (lane.prompt_cells - old_p),
              "g", True)]
    return [s for s in spans if s[1] > 0]


def _strip(lane: Lane, f: Frame, g: int, y: int, at: float, length: float) -> str:
    """Group g's cache strip: its cells, the read flash and the new cells appearing."""
    h, cw = f.row_h - 8, f.cell_w
    before = lane.cached - lane.new_cells
    parts = [f"<g class='mech-strip' data-group='{g}' data-prompt-cells='{lane.prompt_cells}' "
             f"data-generated-cells='{lane.generated_cells}' data-new-cells='{lane.new_cells}'>",
             f"<rect x='{STRIP_X}' y='{y}' width='{STRIP_W}' height='{h}' fill='#f7f7f7' "
             "stroke='#9a9a9a' stroke-dasharray='4 3'/>"]
    for start, count, kind, new in _runs(lane):
        appear = anim("appear", at + length * 0.5, length * 0.5) if new else ""
        parts.append(f"<g {appear}><rect class='mech-cells mech-cells-{kind}' data-cells='{count}' "
                     f"data-new='{int(new)}' x='{STRIP_X + start * cw:.2f}' y='{y}' "
                     f"width='{count * cw:.2f}' height='{h}' fill='url(#{f.uid}-{kind})'/></g>")
    if lane.kind == DECODE and before:
        parts.append(f"<rect x='{STRIP_X - 2}' y='{y - 2}' width='{before * cw + 4:.2f}' "
                     f"height='{h + 4}' fill='none' stroke='{READ_COLOUR}' stroke-width='4' "
                     f"{anim('read', at, length * 1.5)}/>")
    if not lane.uses_cache:
        parts.append(f"<text x='{STRIP_X + 10}' y='{y + h / 2 + 5:.1f}' font-size='15'>"
                     "nothing kept: no cache</text>")
    return "".join(parts) + "</g>"


def _stack(lane: Lane, f: Frame) -> str:
    parts, n = [], len(f.groups)
    length = (CLIMB_END - CLIMB_START) / n
    for g, (lo, hi) in enumerate(f.groups):
        y = f.stack_bottom - (g + 1) * f.row_h + 4
        at = CLIMB_START + g * length
        label = f"layers {lo}–{hi}" if hi > lo else f"layer {lo}"
        parts.append(f"<rect x='{STACK_X}' y='{y}' width='{STACK_W}' height='{f.row_h - 8}' "
                     f"rx='5' fill='#e9e9e9' stroke='#222' stroke-width='2' "
                     f"{anim('lit', at, length * 2)}/>"
                     f"<text x='{STACK_X + STACK_W / 2}' y='{y + (f.row_h - 8) / 2 + 5:.1f}' "
                     f"font-size='{min(16, f.row_h - 10)}' text-anchor='middle' "
                     f"font-weight='600'>{label}</text>")
        parts.append(_strip(lane, f, g, y, at, length))
    return "".join(parts)


def _output_chips(lane: Lane, f: Frame) -> str:
    """The newest output tokens as chips (earlier ones counted), the chosen one appearing last."""
    x, y = STACK_X + 60, f.y + 2
    shown = lane.output[-MAX_CHIPS:]
    parts, cx = [], x
    if len(lane.output) > len(shown):
        parts.append(f"<text x='{cx}' y='{y + 19}' font-size='14'>"
                     f"+{len(lane.output) - len(shown)} earlier</text>")
        cx += 86
    for i, text in enumerate(shown):
        label = chip_label(text)
        w = 12 + 8.4 * len(label)
        if cx + w > WIDTH - 10:
            break
        appear = " " + anim("appear", CLIMB_END, 1 - CLIMB_END) if i == len(shown) - 1 else ""
        parts.append(f"<g{appear}><rect x='{cx:.1f}' y='{y}' width='{w:.1f}' "
                     f"height='26' rx='4' fill='#fde9b8' stroke='#111'/>"
                     f"<text class='mech-chip-text' x='{cx + 6:.1f}' y='{y + 18}' "
                     f"font-size='14'>{html.escape(label)}</text></g>")
        cx += w + 4
    return "".join(parts)


def _fed_column(lane: Lane, f: Frame) -> str:
    """Left of the stack: the tokens this pass fed, one per line (the rest counted)."""
    lines = max(2, (f.stack_bottom - f.stack_top) // 24 - 1)
    verb = {PREFILL: "fed together", DECODE: "fed", RECOMPUTE: "fed again"}[lane.kind]
    head = (f"{lane.rows} row{'s' if lane.rows != 1 else ''}, 1 token each" if lane.rows else
            f"{len(lane.fed)} token{'s' if len(lane.fed) != 1 else ''} {verb}")
    parts = [f"<text x='10' y='{f.stack_top + 14}' font-size='15' font-weight='700'>{head}</text>"]
    for i, text in enumerate(lane.fed[:lines]):
        more = len(lane.fed) - lines
        row = f"row {i + 1}" + (f": {chip_label(text, 10)}" if text else "")
        label = (f"… +{more + 1} more" if i == lines - 1 and more > 0 else
                 row if lane.rows else chip_label(text, 18))
        parts.append(f"<text class='mech-chip-text' x='14' y='{f.stack_top + 38 + i * 22}' "
                     f"font-size='14'>{html.escape(label)}</text>")
    return "".join(parts)


def _block(lane: Lane, f: Frame) -> str:
    """The fed tokens as one block under the stack, as wide as their count, climbing it."""
    n = len(lane.fed)
    w = min(STACK_W, max(16.0, n * f.cell_w))
    colour = RECOMPUTE_COLOUR if lane.kind == RECOMPUTE else (
        PROMPT_COLOUR if lane.kind == PREFILL else GENERATED_COLOUR)
    y = f.stack_bottom + 6
    rise = -(f.stack_bottom - f.stack_top + 14)
    label = (f"{lane.rows} row{'s' if lane.rows != 1 else ''} × 1 token in, together"
             if lane.rows else
             f"{n} tokens in" if n != 1 else f"1 token in: {chip_label(lane.fed[0])}")
    x = STACK_X + (STACK_W - w) / 2
    shown = min(lane.rows, MAX_ROWS_DRAWN)  # one thin bar per row, stacked
    bars = "".join(f"<rect class='mech-row' x='{x:.1f}' y='{y + 20 * r / shown:.2f}' "
                   f"width='{w:.1f}' height='{20 / shown:.2f}' fill='{colour}' stroke='#111' "
                   f"stroke-width='1'/>" for r in range(shown)) if lane.rows else (
        f"<rect x='{x:.1f}' y='{y}' width='{w:.1f}' height='20' fill='{colour}' stroke='#111' "
        "stroke-width='2'/>")
    return (f"<g {anim('climb', CLIMB_START, CLIMB_END - CLIMB_START, f';--rise:{rise}px')}>"
            f"{bars}</g>"
            f"<text x='{STACK_X + STACK_W / 2}' y='{y + 40}' font-size='15' text-anchor='middle' "
            f"font-weight='600'>{html.escape(label)}</text>")


def _clock(lane: Lane, f: Frame) -> str:
    y = f.stack_bottom + 52
    w = max(lane.seconds * f.clock_scale, 2.0)
    return (f"<text x='10' y='{y + 15}' font-size='15' font-weight='700'>measured time</text>"
            f"<rect x='{STACK_X}' y='{y}' width='{w:.1f}' height='20' fill='#ddd' stroke='#111'/>"
            f"<rect class='mech-anim mech-do-clock mech-clock' style='--at:0;--for:1' "
            f"x='{STACK_X}' y='{y}' width='{w:.1f}' height='20' fill='#111'/>"
            f"<text x='{STACK_X + w + 8:.1f}' y='{y + 16}' font-size='16' font-weight='700'>"
            f"{lane.seconds * 1000:,.1f} ms</text>")


def lane_svg(lane: Lane, f: Frame) -> str:
    top = (f"<text x='10' y='{f.y + 20}' font-size='17' font-weight='700'>{html.escape(lane.title)}"
           f"</text><text x='{STACK_X}' y='{f.y + 20}' font-size='15'>output:</text>")
    per = f"per group, × {lane.rows} rows" if lane.rows > 1 else "per group"
    strip_note = (f"<text x='{STRIP_X}' y='{f.stack_top - 4}' font-size='14'>KV cache: "
                  f"{lane.cached} positions {per} ({lane.prompt_cells} prompt + "
                  f"{lane.generated_cells} generated)</text>") if lane.uses_cache else ""
    weights = (f"<text class='mech-weights' x='10' y='{f.stack_top - 4}' font-size='13' "
               f"font-weight='700'>{html.escape(lane.weights)}</text>") if lane.weights else ""
    return (f"<g class='mech-lane' data-kind='{lane.kind}' data-cached='{lane.cached}' "
            f"data-rows='{lane.rows}' data-ms='{lane.seconds * 1000:.3f}' "
            f"style='--measured:{lane.seconds:.6f}s'>"
            + top + _output_chips(lane, f) + strip_note + weights + _stack(lane, f)
            + (_fed_column(lane, f) + _block(lane, f) + _clock(lane, f) if lane.fed else "")
            + "</g>")
