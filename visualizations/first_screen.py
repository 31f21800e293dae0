"""The first screen: its big numbers and its live picture, the mechanism diagram small enough to
share a screen with the answer, text never under 12 px: each lane drawn wide (5 groups of layers)
and narrow (3), a CSS container query showing the one its box fits, never shrunk."""
from __future__ import annotations

import hashlib
import html
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from string import Template

from . import mechanism_svg as svg
from .cards import WAITING, Card, cards_html, ms, ratio_side, times
from .glossary import NOTES
from .mechanism import decode_lane, layer_groups, nice_capacity, race_lanes, slow_factor
from .mechanism_svg import DECODE, PREFILL, READ_COLOUR, Lane, anim, chip_label
from .noise_view import busy_notice_html, quiet_note, supports_verdict
from .timing_text import prompt_work

FONT = 13  # user units = CSS px at the smallest size a picture is shown (12 px at 12/13)
ROW = 24  # one group of layers: its box and the gap above it
TOP, BOTTOM = 24, 28  # the title row above the stack; the clock row under it


@dataclass(frozen=True)
class Size:
    """One fixed drawing of a lane: its width in user units and what fits in it."""

    name: str  # "wide" or "narrow" (the CSS shows the one its box fits)
    width: int
    groups: int  # groups of layers drawn
    label_w: int  # the layer boxes' width

    def label(self, lo: int, hi: int) -> str:
        span = f"{lo}–{hi}" if hi > lo else f"{lo}"
        return f"layers {span}" if self.name == "wide" else span


WIDE = Size("wide", 560, 5, 104)
NARROW = Size("narrow", 220, 3, 48)
WIDE_FROM_PX = 540  # a box this wide shows the wide drawing (560 units at ≥ 12/13 scale)
LARGEST_SCALE = 1.1  # a drawing grows to fill its box up to this, then stays centred


def _text(x: float, y: float, body: str, extra: str = "") -> str:
    return f"<text x='{x:.1f}' y='{y:.1f}' font-size='{FONT}'{extra}>{body}</text>"


def _strip(lane: Lane, x: float, y: float, w: float, cell_w: float, g: int) -> str:
    """One group's cache strip: prompt cells, generated cells, the read flash, the new cells."""
    h = ROW - 6
    before = lane.cached - lane.new_cells
    parts = [f"<g class='mech-strip' data-group='{g}' data-prompt-cells='{lane.prompt_cells}' "
             f"data-generated-cells='{lane.generated_cells}' data-new-cells='{lane.new_cells}'>"
             f"<rect x='{x}' y='{y}' width='{w:.1f}' height='{h}' fill='#f4f4f4' "
             "stroke='#8a8a8a' stroke-dasharray='3 3'/>"]
    if not lane.uses_cache:
        parts.append(_text(x + 6, y + h - 5, "nothing kept"))
    runs = ((0, lane.prompt_cells, svg.PROMPT_COLOUR, "p"),
            (lane.prompt_cells, lane.generated_cells, svg.GENERATED_COLOUR, "g"))
    for start, count, colour, kind in runs:
        fresh = max(0, min(start + count, lane.cached) - max(start, before))
        if count <= 0:
            continue
        parts.append(f"<rect class='mech-cells mech-cells-{kind}' data-cells='{count}' "
                     f"data-new='{fresh}' x='{x + start * cell_w:.2f}' y='{y}' "
                     f"width='{count * cell_w:.2f}' height='{h}' fill='{colour}'/>")
    if lane.new_cells and lane.uses_cache:  # the pass's new cells appear as it ends
        parts.append(f"<rect x='{x + before * cell_w:.2f}' y='{y}' "
                     f"width='{max(lane.new_cells * cell_w, 2):.2f}' height='{h}' fill='none' "
                     f"stroke='#111' stroke-width='2' {anim('appear', 0.6, 0.3)}/>")
    if lane.kind == DECODE and before:  # the decode step reads every earlier cell
        parts.append(f"<rect x='{x - 2}' y='{y - 2}' width='{before * cell_w + 4:.2f}' "
                     f"height='{h + 4}' fill='none' stroke='{READ_COLOUR}' stroke-width='3' "
                     f"{anim('read', 0.1, 0.6)}/>")
    return "".join(parts) + "</g>"


def lane_svg(lane: Lane, size: Size, layers: int, capacity: int, clock_s: float) -> str:
    groups = layer_groups(layers, size.groups)
    strip_x = size.label_w + 8
    strip_w = size.width - strip_x - 2
    cell_w = strip_w / max(capacity, 1)
    height = TOP + ROW * len(groups) + BOTTOM
    fed = len(lane.fed)
    fed_said = (f"{fed} tokens in" if lane.kind == PREFILL or not lane.uses_cache else
                "1 token in") if fed else ""
    parts = [_text(0, 16, f"<tspan font-weight='700'>{html.escape(lane.title)}</tspan>"
                   + (f" · {fed_said}" if fed_said else ""))]
    if lane.output and size.name == "wide":  # the token this pass wrote, at the top right
        parts.append(_text(size.width - 2, 16, "→ " + html.escape(chip_label(lane.output[-1], 10)),
                           " text-anchor='end' font-weight='700' class='mech-chip-text "
                           "mech-anim mech-do-appear' style='--at:0.86;--for:0.14'"))
    length = 0.7 / len(groups)
    for g, (lo, hi) in enumerate(groups):  # bottom group first
        y = TOP + ROW * (len(groups) - 1 - g)
        parts.append(f"<rect x='0' y='{y}' width='{size.label_w}' height='{ROW - 6}' rx='4' "
                     f"fill='#e9e9e9' stroke='#222' stroke-width='1.5' "
                     f"{anim('lit', 0.08 + g * length, length * 2)}/>"
                     + _text(size.label_w / 2, y + ROW - 11, size.label(lo, hi),
                             " text-anchor='middle' font-weight='600'"))
        parts.append(_strip(lane, strip_x, y, strip_w, cell_w, g))
    y = TOP + ROW * len(groups) + 4
    bar_w = strip_w - 64  # room after the longest bar for its "1,234 ms"
    w = max(lane.seconds / clock_s * bar_w, 2.0) if clock_s > 0 else 0.0
    if lane.fed:
        parts.append(_text(0, y + 14, "time") +
                     f"<rect x='{strip_x}' y='{y}' width='{w:.1f}' height='18' fill='#ddd'/>"
                     f"<rect class='mech-anim mech-do-clock mech-clock' style='--at:0;--for:1' "
                     f"x='{strip_x}' y='{y}' width='{w:.1f}' height='18' fill='#111'/>"
                     + _text(strip_x + w + 6, y + 14,
                             ms(lane.seconds, 0), " font-weight='700' class='fs-ms'"))
    return (f"<svg class='fs-{size.name}' viewBox='0 0 {size.width} {height}' "
            f"style='max-width:{size.width * LARGEST_SCALE:.0f}px' role='img' "
            f"aria-label='{html.escape(lane.title)}' xmlns='http://www.w3.org/2000/svg'>"
            f"<g class='mech-lane' data-kind='{lane.kind}' data-cached='{lane.cached}' "
            f"data-ms='{lane.seconds * 1000:.3f}' style='--measured:{lane.seconds:.6f}s'>"
            + "".join(parts) + "</g></svg>")


_CSS = Template((Path(__file__).resolve().parent.parent / "assets" / "first_screen.css")
                .read_text(encoding="utf-8")).substitute(
    lane_px=f"{NARROW.width * 12 / FONT:.0f}", wide_from_px=WIDE_FROM_PX)


def picture_html(lanes: Sequence[Lane], layers: int, step_said: str, *, name: str,
                 capacity: int, factor: int | None = None, step: int | None = None) -> str:
    factor = factor or slow_factor(min(ln.seconds for ln in lanes))
    clock_s = max(ln.seconds for ln in lanes)
    uid = "fs-" + name + "-" + hashlib.sha1(repr((lanes, capacity)).encode()).hexdigest()[:8]
    drawn = "".join(
        "<div class='fs-lane'>" + "".join(lane_svg(ln, size, layers, capacity, clock_s)
                                          for size in (WIDE, NARROW)) + "</div>"
        for ln in lanes)
    return (f"<div class='fs-picture fs-{name}' id='{uid}' data-kind='{lanes[0].kind}' "
            f"data-step='{'' if step is None else step}' data-factor='{factor}' "
            f"data-cached='{lanes[0].cached}' data-layers='{layers}'>"
            f"<style>{svg.mechanism_css()}{_CSS}</style><div class='fs-step'>{step_said}</div>"
            f"<div class='mech-stage fs-lanes' style='--slow:{factor}'>{drawn}</div>"
            + "<div class='fs-legend'>KV cache:"
            f"<span class='fs-key' style='background:{svg.PROMPT_COLOUR}'></span>prompt"
            f"<span class='fs-key' style='background:{svg.GENERATED_COLOUR}'></span>answer"
            f"<span class='fs-key' style='border:2px solid {READ_COLOUR}'></span>read"
            + (f" · shown {factor}× slower" if any(ln.fed for ln in lanes) else "")
            + "<span class='mech-still'> (motion reduced: the end of each step)</span></div></div>")


def empty_picture(layers: int, message: str, name: str,
                  titles: tuple[str, ...] = ("the model",)) -> str:
    lanes = [Lane(title=t, kind=PREFILL) for t in titles]
    body = picture_html(lanes, layers, message, name=name, capacity=16, factor=1)
    return body.replace("class='fs-picture", "class='fs-picture fs-empty", 1)


def step_line(ev) -> str:
    """What one `StepEvent`'s pass did, in plain words from its measured fields."""
    shared = getattr(ev, "batch_rows", 1)
    with_others = f", sharing the pass with {shared - 1} other request(s)" if shared > 1 else ""
    took_ms = ms(ev.seconds, 0)
    if ev.index and ev.forward_tokens == 1:
        read = ev.cache_tokens - 1
        return (f"step {ev.index}: the model read {read} earlier token{'s' if read != 1 else ''} "
                f"from its cache and wrote one more in {took_ms}{with_others}")
    cached = getattr(ev, "prefix_cached_tokens", 0)
    passes = getattr(ev, "prefill_passes", 1)
    how = ("in one pass" if passes == 1 else f"in {passes} passes" if passes > 1 else
           "")  # 0: another engine's answer, its passes its own
    took = (f"took {cached} prompt tokens from its prefix cache, read the other "
            f"{ev.forward_tokens} {how}".rstrip() if cached else
            f"read all {ev.forward_tokens} tokens {how}").rstrip()
    if ev.index:  # a freed cache: the whole text fed again
        return (f"step {ev.index}: the cache was freed, so the model {took} and wrote one more "
                f"in {took_ms}{with_others}")
    timed = f"; its last pass took {took_ms}" if passes > 1 else f" in {took_ms}"
    return (f"step 0, the prompt: the model {took}, kept their keys and values in its cache "
            f"and wrote the first token{timed}{with_others}")


def live_picture(prompt: Sequence[str], events: Sequence, layers: int, *, capacity: int) -> str:
    e = events[-1]  # its title short: the step line above says the rest
    lane = replace(decode_lane(prompt, events), title=f"step {e.index}" + (
        "" if e.index and e.forward_tokens == 1 else ": refill" if e.index else ": the prompt"))
    typical = statistics.median(e.seconds for e in events[1:]) if len(events) > 1 else None
    return picture_html([lane], layers, step_line(e), name="live",
                        capacity=max(capacity, lane.cached), step=e.index,
                        factor=slow_factor(typical or lane.seconds))


def race_picture(prompt: Sequence[str], steps: Sequence, layers: int, *,
                 output: Sequence[str] = (), capacity: int | None = None) -> str:
    lanes = race_lanes(prompt, steps, output)
    c, r = lanes
    cached = [s.seconds for s in steps if s.lane == "cached" and s.index > 0]
    step, read = len(c.output) - 1, c.cached - c.new_cells
    said = (f"step {step}: with the cache the model fed {len(c.fed)} token"
            f"{'s' if len(c.fed) != 1 else ''}"
            + (f" and read {read} from its cache" if read else "")
            + f" in <b>{ms(c.seconds, 0)}</b>; without it, it fed all {len(r.fed)} again "
            f"in <b>{ms(r.seconds, 0)}</b>")
    return picture_html(lanes, layers, said, name="live-race",
                        capacity=capacity or nice_capacity(len(r.fed)), step=step,
                        factor=slow_factor(statistics.median(cached) if cached else c.seconds))


def live_cards_html(ttft_s: float | None, per_token_s: float | None, prompt_tokens: int,
                    decoded: int, batch_rows: int = 1, first_event=None,
                    queued_s: float = 0.0, busy: bool = False) -> str:
    """The two live cards: `ttft_s` from sending (any wait for a row, then the prefill)."""
    work = (prompt_work(first_event, queued_s) if first_event is not None
            else f"{prompt_tokens} prompt tokens")
    noisy = " · noisy" if busy else ""  # one label line: the busy notice under them says why
    first = Card(f"first token{noisy}", WAITING if ttft_s is None else f"{ttft_s * 1000:,.0f} ms",
                 "appears when the prompt's prefill ends" if ttft_s is None else
                 f"measured: {work}")
    shared = f", shared with {batch_rows - 1} other request(s)" if batch_rows > 1 else ""
    nxt = Card(f"each next token{noisy}",
               WAITING if per_token_s is None else f"{per_token_s * 1000:,.0f} ms",
               "appears after the second token" if per_token_s is None else
               f"measured: mean of {decoded} one-token steps{shared}")
    return cards_html([first, nxt])


def race_ratio_html(summary, noise=None) -> str:
    """The race's measured ratio big, both totals, then the busy notice or what they support."""
    if summary is None or not summary.new_tokens:
        return NOTES["race_waiting"]
    busy = noise is not None and noise.busy
    note = ("noisy: run again" if busy else "so far" if noise is None else
            "measured, same tokens" if summary.same_tokens else "measured, tokens differ")
    impossible = summary.impossible if noise is not None else None
    cards = cards_html([
        Card("time without ÷ with the cache", "—", "impossible: not shown") if impossible else
        Card("time without ÷ with the cache", times(summary.speedup), note)]) + (
        f"With the cache **{summary.cached_seconds:.2f} s** "
        f"({summary.cached_forward_tokens:,} tokens through the model); recomputing everything "
        f"**{summary.recompute_seconds:.2f} s** ({summary.recompute_forward_tokens:,} tokens).  \n")
    if impossible:  # past physics: the reason stands where the figure would
        return cards + busy_notice_html(noise) + (
            f"**Not a possible result**: {impossible} This machine was disturbed while racing: "
            "press the button again.")
    if supports_verdict(noise):
        why = (f"Over {summary.new_tokens} tokens the cache saved "
               f"{1 - 1 / summary.speedup:.0%} of the time: each step fed one token instead of "
               "the whole text again." if ratio_side(summary.speedup) == "faster" else
               "Over so few tokens the saving was no bigger than the steps' own variation.")
        quiet = quiet_note(noise)
        return cards + why + (f"  \n*{quiet}.*" if quiet else "")
    if busy:  # the ratio stays first, right under its button; the notice follows it
        return cards + busy_notice_html(noise)
    return cards + f"*Racing: {summary.new_tokens} steps done in both lanes…*"
