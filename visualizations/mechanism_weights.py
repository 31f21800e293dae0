"""The weight read, on the mechanism diagram: what lessons 5 and 6 change about one forward pass.

Every decode step reads every weight once. Lesson 5 shares that read: B requests enter the
layer stack together as B rows, one token each. Lesson 6 shrinks it: fewer bytes per weight.
Each beat is one measured step beside batch 1 or float32, at one slow-down, so the beats keep
their measured ratio. A comparison is two numbers and their ratio, never a word like "faster".
"""
from __future__ import annotations

import html
from collections.abc import Sequence

from .cards import ms
from .mechanism import diagram_html, empty_diagram
from .mechanism_svg import DECODE, Lane
from .noise_view import BUSY


def _mb(n_bytes: float) -> str:
    return f"{n_bytes / 1e6:,.0f} MB"


def _busy(noise) -> str:
    return f"⚠️ {html.escape(BUSY.capitalize())}. " if noise is not None and noise.busy else ""


def _floor(n_bytes: float, bandwidth_gbs: float | None) -> float | None:
    """Theoretical: seconds to read `n_bytes` at the measured bandwidth (None: not measured)."""
    return n_bytes / (bandwidth_gbs * 1e9) if bandwidth_gbs else None


def batch_lane(point) -> Lane:
    """One timed decode step of a batch: B rows, one token each; every row's cache holds the
    prompt, the warm-up step's token and the timed steps' tokens."""
    generated = 1 + len(point.step_times)
    return Lane(title=f"batch of {point.batch}", kind=DECODE, fed=("",) * point.batch,
                prompt_cells=point.prompt_tokens, generated_cells=generated, new_cells=1,
                output=(), seconds=point.step_seconds, rows=point.batch,
                weights=f"weights read once: {_mb(point.weight_bytes)}")


def batch_diagram(points: Sequence, layers: int, *, bandwidth_gbs: float | None = None,
                  noise=None) -> str:
    """The newest batch size measured beside batch 1: the same weights read once per step,
    for B rows or for one. `bandwidth_gbs`: the measured read bandwidth (for the floor)."""
    if not points:
        return empty_diagram(layers, "Press <b>Run sweep</b>: B requests go through the layers "
                             "together, as B rows of one pass that reads the weights once.",
                             "batch")
    one, big = points[0], points[-1]
    shown = [big] if big is one else [one, big]
    head = (f"{_busy(noise)}Batch {big.batch}: {big.batch} row{'s' if big.batch != 1 else ''} "
            f"in one pass share one read of the weights ({_mb(big.weight_bytes)}) · measured "
            f"step <b>{ms(big.step_seconds)}</b> = {big.batch / big.step_seconds:,.1f} "
            "tokens/s in total")
    if big is not one:
        head += (f" · batch {one.batch}: <b>{ms(one.step_seconds)}</b> = "
                 f"{one.batch / one.step_seconds:,.1f} tokens/s · {big.batch / one.batch:g}× the "
                 f"rows took {big.step_seconds / one.step_seconds:.2f}× the step time")
    floor = _floor(big.weight_bytes + big.cache_bytes, bandwidth_gbs)
    if floor is not None:
        head += (f" · theoretical floor of batch {big.batch}'s step = (weights + KV cache "
                 f"bytes) ÷ {bandwidth_gbs:,.1f} GB/s measured = {ms(floor)}")
    return diagram_html([batch_lane(p) for p in shown], layers, head, name="batch",
                        step=big.batch)


def bytes_per_weight(report, parameters: int) -> float:
    """Stored weight bytes ÷ parameters: 4 for float32, about 1 for int8 (its scales too)."""
    return report.weight_bytes / max(parameters, 1)


def quant_lane(report, parameters: int) -> Lane:
    """The mode's last decode step: one token in, every weight read at the mode's bytes; its
    time is the measured mean step (1 ÷ decode tokens/s)."""
    pieces = tuple(report.pieces)
    return Lane(title=report.key, kind=DECODE, fed=pieces[-2:-1] or ("…",),
                prompt_cells=report.prompt_tokens, generated_cells=max(len(pieces) - 1, 0),
                new_cells=1, output=pieces, seconds=1 / report.decode_tokens_per_s,
                weights=f"{bytes_per_weight(report, parameters):.2f} B/weight · "
                        f"{_mb(report.bytes_per_token)} read")


def quant_diagram(reports: Sequence, layers: int, parameters: int, *,
                  bandwidth_gbs: float | None = None, noise=None) -> str:
    """The newest measured mode beside float32: one decode step each, at its bytes per weight."""
    if not reports:
        return empty_diagram(layers, "Press <b>Compare modes</b>: every decode step reads every "
                             "weight; a mode with fewer bytes per weight has less to read.",
                             "quant")
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
        floors = ", ".join(f"{r.key} {ms(_floor(r.bytes_per_token, bandwidth_gbs))}"
                           for r in shown)
        head += (f" · theoretical floor = bytes read ÷ {bandwidth_gbs:,.1f} GB/s measured: "
                 f"{floors}")
    return diagram_html([quant_lane(r, parameters) for r in shown], layers, head, name="quant",
                        step=len(newest.pieces) - 1)
