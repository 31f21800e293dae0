"""The mechanism, animated: the model as a stack of layers, tokens climbing it, the KV cache as
one strip per group of layers. Every beat is one measured forward pass (prefill, decode step, the
race's no-cache lane; lessons 5 and 6: B rows sharing one weight read, fewer bytes per weight),
lasting its measured seconds × one visible slow-down. Not drawn: heads, attention, the MLP."""
from __future__ import annotations

import hashlib
import html
import statistics
from collections.abc import Sequence

from . import mechanism_svg as svg
from .cards import ms
from .glossary import NOTES
from .mechanism_svg import DECODE, FACTORS, PREFILL, RECOMPUTE, WIDTH, Frame, Lane, lane_svg
from .noise_view import BUSY

LONGEST_BEAT_S = 2.0  # the factor is the largest that keeps a typical beat this short
RACE_TITLES = ("with the KV cache", "without a cache")  # the race's two lanes, top first


def layer_groups(layers: int, most: int = 10) -> tuple[tuple[int, int], ...]:
    """(first, last) layer of each drawn group, 1-based, bottom first: 30 -> 10 groups of 3."""
    size = -(-max(layers, 1) // most)
    return tuple((lo, min(lo + size - 1, layers)) for lo in range(1, max(layers, 1) + 1, size))


def slow_factor(seconds: float) -> int:
    """The largest offered slow-down that shows `seconds` in at most `LONGEST_BEAT_S`."""
    fitting = [f for f in FACTORS if seconds * f <= LONGEST_BEAT_S]
    return fitting[-1] if fitting else FACTORS[0]


def nice_capacity(positions: int) -> int:
    """Strip capacity for `positions`: the next of 16, 32, 64, ... so cells keep their width."""
    return max(16, 1 << (positions - 1).bit_length())


def _labels(prompt: Sequence) -> list[str]:
    """The prompt's token texts: `Token`-like records' .text, or the strings themselves."""
    return [t if isinstance(t, str) else str(getattr(t, "text", t)) for t in prompt]


def decode_lane(prompt: Sequence, events: Sequence) -> Lane:
    """The newest event's forward pass: what it fed, what the cache held after it."""
    e = events[-1]
    labels = _labels(prompt)
    n_prompt = len(labels) or events[0].forward_tokens
    sequence = labels + [ev.piece for ev in events]
    before = max(e.cache_tokens - e.forward_tokens, 0)  # a prefill: its prefix-cache hit
    kind = DECODE if e.index and e.forward_tokens == 1 else PREFILL
    title = (f"decode step {e.index}" if kind == DECODE else
             f"step {e.index}: refill" if e.index else  # a freed cache: all fed again
             f"prefill, {before} tokens from the prefix cache" if before else "prefill")
    prompt_cells = min(n_prompt, e.cache_tokens)
    return Lane(title=title, kind=kind, fed=tuple(sequence[before:e.cache_tokens]),
                prompt_cells=prompt_cells, generated_cells=e.cache_tokens - prompt_cells,
                new_cells=e.forward_tokens, output=tuple(ev.piece for ev in events),
                seconds=e.seconds)


def race_lanes(prompt: Sequence, steps: Sequence, output: Sequence[str] = ()) -> list[Lane]:
    """The newest step both lanes finished: the cached lane, then the recompute lane."""
    by = {(s.lane, s.index): s for s in steps}
    done = [s.index for s in steps if s.lane == RECOMPUTE and ("cached", s.index) in by]
    if not done:
        return []
    i = max(done)
    labels = _labels(prompt)
    ids = [by[("cached", k)].token_id for k in range(i + 1) if ("cached", k) in by]
    pieces = [output[k] if k < len(output) else f"#{t}" for k, t in enumerate(ids)]
    sequence = labels + pieces
    c, r = by[("cached", i)], by[(RECOMPUTE, i)]
    cached = Lane(title=RACE_TITLES[0], kind=PREFILL if i == 0 else DECODE,
                  fed=tuple(sequence[c.sequence - c.forward_tokens:c.sequence]),
                  prompt_cells=len(labels), generated_cells=c.sequence - len(labels),
                  new_cells=c.forward_tokens, output=tuple(pieces), seconds=c.seconds)
    plain = Lane(title=RACE_TITLES[1], kind=RECOMPUTE, fed=tuple(sequence[:r.forward_tokens]),
                 output=tuple(pieces), seconds=r.seconds, uses_cache=False)
    return [cached, plain]


def _controls(uid: str, factor: int) -> str:
    """Replay, Pause and speed: hidden inputs first (the CSS reads them), then their labels."""
    i = FACTORS.index(factor)
    offered = FACTORS[max(i - 1, 0):i + 3]
    inputs = [f"<input type='checkbox' id='{uid}-{what}' class='mech-toggle mech-{what}' "
              f"aria-label='{what.capitalize()}'>" for what in ("replay", "pause")]
    labels = [f"<label for='{uid}-replay' class='mech-replay-label'>↻ Replay</label>",
              f"<label for='{uid}-pause' class='mech-pause-label'>⏸ Pause</label>",
              "<span>slow-down:</span>"]
    says = []
    for f in offered:
        checked = " checked" if f == factor else ""
        inputs.append(f"<input type='radio' name='{uid}-speed' id='{uid}-s{f}' "
                      f"class='mech-toggle mech-s{f}' aria-label='slowed {f} times'{checked}>")
        labels.append(f"<label for='{uid}-s{f}' class='mech-speed-{f}'>{f}×</label>")
        says.append(f"<span class='mech-say mech-say-{f}'>slowed {f}×: 1 s on screen = "
                    f"{1000 / f:g} ms measured</span>")
    return "".join(inputs) + "<div class='mech-controls'>" + "".join(labels + says) + "</div>"


def _caption(layers: int, groups: tuple[tuple[int, int], ...]) -> str:
    size = groups[0][1] - groups[0][0] + 1
    grouped = (f"the model's {layers} layers drawn as {len(groups)} groups of {size}"
               if size > 1 else f"the model's {layers} layers")
    return (f"<div class='mech-caption'>Bottom to top: {grouped}; each group's strip is its KV "
            "cache, one cell per cached position:<span class='mech-key' "
            f"style='background:{svg.PROMPT_COLOUR}'></span>prompt<span class='mech-key' "
            f"style='background:{svg.GENERATED_COLOUR}'></span>generated. Each beat lasts its "
            "measured time × the slow-down; the bar fills over it. <span class='mech-still'>Motion "
            "is reduced: the end of the beat is shown.</span></div>")


def diagram_html(lanes: Sequence[Lane], layers: int, head: str, *, name: str,
                 capacity: int | None = None, factor: int | None = None,
                 step: int | None = None) -> str:
    groups = layer_groups(layers)
    cap = capacity or nice_capacity(max([ln.cached for ln in lanes] + [len(ln.fed) for ln in lanes]
                                        + [1]))
    factor = factor if factor in FACTORS else slow_factor(min(ln.seconds for ln in lanes))
    longest = max(ln.seconds for ln in lanes)
    uid = "mech-" + name + "-" + hashlib.sha1(repr((lanes, cap, factor)).encode()).hexdigest()[:8]
    row_h = 34 if len(lanes) == 1 else 26
    frames, y = [], 0
    for _ in lanes:
        frame = Frame(y=y, row_h=row_h, groups=groups, capacity=cap, uid=uid, longest_s=longest)
        frames.append(frame)
        y += frame.height + 10
    drawing = (f"<svg viewBox='0 0 {WIDTH} {y}' role='img' "
               f"aria-label='{html.escape(head, True)}' xmlns='http://www.w3.org/2000/svg'>"
               + svg.patterns(uid, frames[0].cell_w, row_h)
               + "".join(lane_svg(ln, fr) for ln, fr in zip(lanes, frames)) + "</svg>")
    data = (f"data-kind='{lanes[0].kind}' data-step='{'' if step is None else step}' "
            f"data-factor='{factor}' data-beat-ms='{longest * 1000:.3f}' data-layers='{layers}' "
            f"data-groups='{len(groups)}' data-cached='{lanes[0].cached}' data-capacity='{cap}'")
    return (f"<div class='mech' id='{uid}' {data}><style>{svg.mechanism_css()}</style>"
            + _controls(uid, factor) + f"<div class='mech-head'>{head}</div>"
            + f"<div class='mech-stage'>{drawing}</div>" + _caption(layers, groups) + "</div>")


def empty_diagram(layers: int, message: str, name: str) -> str:
    body = diagram_html([Lane(title="", kind=PREFILL)], layers, message, name=name, capacity=16)
    return body.replace("class='mech'", "class='mech mech-empty'", 1)


def decode_diagram(prompt: Sequence, events: Sequence, layers: int, *,
                   capacity: int | None = None, factor: int | None = None) -> str:
    """The newest of a generation's `StepEvent`s, at a slow-down fitting its median step."""
    if not events:
        return empty_diagram(layers, NOTES["diagram_decode"], "decode")
    lane = decode_lane(prompt, events)
    e = events[-1]
    typical = statistics.median(ev.seconds for ev in events[1:]) if len(events) > 1 else e.seconds
    passes = getattr(e, "prefill_passes", 1) if e.index == 0 else 1  # chunks on the server
    what = (f"{e.forward_tokens} tokens computed in "
            + ("one pass" if passes <= 1 else f"{passes} passes (chunked prefill)")
            if lane.kind == PREFILL else f"1 token in, {e.cache_tokens - 1} cached positions read")
    measured = "last pass measured" if passes > 1 else "measured"  # the event times its pass
    head = (f"{html.escape(lane.title.capitalize())}: {what} · {measured} <b>{ms(e.seconds)}</b> "
            f"(forward {ms(e.forward_seconds)})")
    if getattr(e, "batch_rows", 1) > 1:
        head += f" · shared with {e.batch_rows - 1} other request(s)"
    return diagram_html([lane], layers, head, name="decode", capacity=capacity, step=e.index,
                        factor=factor or slow_factor(typical))


def prefill_diagram(prompt: Sequence, events: Sequence, layers: int) -> str:
    if not events:
        return empty_diagram(layers, NOTES["diagram_prefill"], "prefill")
    lanes = [decode_lane(prompt, events[:1])]
    first = events[0]
    head = (f"Prefill: {first.forward_tokens} tokens in one pass, measured "
            f"<b>{ms(first.seconds)}</b> (forward {ms(first.forward_seconds)})")
    if len(events) > 1:
        lanes.append(decode_lane(prompt, events[:2]))
        head += (f" · then decode step 1: 1 token in, <b>{ms(events[1].seconds)}</b>: "
                 f"{first.seconds / max(events[1].seconds, 1e-9):.1f}× the time for "
                 f"{first.forward_tokens}× the tokens")
    return diagram_html(lanes, layers, head, name="prefill", step=0)


def race_diagram(prompt: Sequence, steps: Sequence, layers: int, *,
                 output: Sequence[str] = (), capacity: int | None = None) -> str:
    """The race's newest finished step at one slow-down (`output`: the cached lane's texts)."""
    lanes = race_lanes(prompt, steps, output)
    if not lanes:
        return empty_diagram(layers, NOTES["diagram_race"], "race")
    c, r = lanes
    cached = [s.seconds for s in steps if s.lane == "cached" and s.index > 0]
    step = len(c.output) - 1
    head = (f"Step {step}: with the cache {len(c.fed)} token{'s' if len(c.fed) != 1 else ''} "
            f"in, <b>{ms(c.seconds)}</b> · without it {len(r.fed)} tokens in again, "
            f"<b>{ms(r.seconds)}</b>")
    return diagram_html(lanes, layers, head, name="race", capacity=capacity,
                        factor=slow_factor(statistics.median(cached) if cached else c.seconds),
                        step=step)


def _mb(n_bytes: float) -> str:
    return f"{n_bytes / 1e6:,.0f} MB"


def _busy(noise) -> str:
    return f"⚠️ {html.escape(BUSY.capitalize())}. " if noise is not None and noise.busy else ""


def batch_diagram(points: Sequence, layers: int, *, bandwidth_gbs: float | None = None,
                  noise=None) -> str:
    """The newest batch size beside batch 1 (`bandwidth_gbs`, measured: the floor shown)."""
    if not points:
        return empty_diagram(layers, NOTES["diagram_batch"], "batch")
    one, big = points[0], points[-1]
    shown = [big] if big is one else [one, big]
    head = _busy(noise) + (f'Batch {big.batch}: {big.batch} row{"s" if big.batch != 1 else ""} in '
                           f'one pass share one read of the weights ({_mb(big.weight_bytes)}) · '
                           f'measured step <b>{ms(big.step_seconds)}</b> = '
                           f'{big.batch / big.step_seconds:,.1f} tokens/s in total')
    if big is not one:
        head += " · " + (f"batch {one.batch}: <b>{ms(one.step_seconds)}</b> = "
                         f"{one.batch / one.step_seconds:,.1f} tokens/s · "
                         f"{big.batch / one.batch:g}× the rows took "
                         f"{big.step_seconds / one.step_seconds:.2f}× the step time")
    if bandwidth_gbs:
        floor = (big.weight_bytes + big.cache_bytes) / (bandwidth_gbs * 1e9)  # theoretical
        head += (f" · theoretical floor of batch {big.batch}'s step = (weights + KV cache "
                 f"bytes) ÷ {bandwidth_gbs:,.1f} GB/s measured = {ms(floor)}")
    lanes = [Lane(title=f"batch of {p.batch}", kind=DECODE, fed=("",) * p.batch, rows=p.batch,
                  prompt_cells=p.prompt_tokens, generated_cells=1 + len(p.step_times),
                  new_cells=1, seconds=p.step_seconds,  # cached: the warm-up and timed tokens
                  weights=f"weights read once: {_mb(p.weight_bytes)}") for p in shown]
    return diagram_html(lanes, layers, head, name="batch", step=big.batch)


def bytes_per_weight(report, parameters: int) -> float:
    """Stored weight bytes ÷ parameters: 4 for float32, about 1 for int8 (its scales too)."""
    return report.weight_bytes / max(parameters, 1)


def quant_diagram(reports: Sequence, layers: int, parameters: int, *,
                  bandwidth_gbs: float | None = None, noise=None) -> str:
    if not reports:
        return empty_diagram(layers, NOTES["diagram_quant"], "quant")
    base = next((r for r in reports if r.key == "fp32"), reports[0])
    newest = reports[-1]
    shown = [base] if newest is base else [base, newest]
    head = _busy(noise) + "Every decode step reads every weight · " + " · ".join(
        f"{html.escape(r.label)}: {bytes_per_weight(r, parameters):.2f} B per weight, "
        f"{_mb(r.bytes_per_token)} read per step, measured <b>{ms(1 / r.decode_tokens_per_s)}</b>"
        for r in shown)
    if newest is not base:
        head += (f" · {newest.key}: {newest.bytes_per_token / base.bytes_per_token:.2f}× the "
                 f"bytes, {base.decode_tokens_per_s / newest.decode_tokens_per_s:.2f}× the "
                 "step time")
    if bandwidth_gbs:
        floors = ", ".join(f"{r.key} {ms(r.bytes_per_token / (bandwidth_gbs * 1e9))}"
                           for r in shown)
        head += (f" · theoretical floor = bytes read ÷ {bandwidth_gbs:,.1f} GB/s measured: "
                 f"{floors}")
    lanes = [Lane(title=r.key, kind=DECODE, fed=tuple(r.pieces[-2:-1]) or ("…",),  # last step
                  prompt_cells=r.prompt_tokens, generated_cells=max(len(r.pieces) - 1, 0),
                  new_cells=1, output=tuple(r.pieces), seconds=1 / r.decode_tokens_per_s,
                  weights=f"{bytes_per_weight(r, parameters):.2f} B/weight · "
                          f"{_mb(r.bytes_per_token)} read") for r in shown]
    return diagram_html(lanes, layers, head, name="quant", step=len(newest.pieces) - 1)
