"""Lesson 5 text: sweep and scheduler progress, the padding explanation and the closing note
from what this machine measured (the tables live in `batching_tables`)."""
from __future__ import annotations

from collections.abc import Sequence

from .batching_charts import throughput_trend
from .cards import WAITING, Card, cards_html, times
from .glossary import NOTES
from .noise_view import busy_notice_html, reference_card, supports_verdict

VIRTUAL_CLOCK = NOTES["virtual_clock"]
NO_SWEEP_YET = "Run the batch sweep first: costs come from its measured throughput."
NO_PROMPTS = "Type a few prompts, one per line."
NO_SWEEP_CARDS = NOTES["no_sweep_cards"]


def sweep_progress_markdown(update, message: str) -> str:
    return f"{'✅' if update.finished else '⏳'} {message}"


def sweep_cards(sweep, noise=None, reference=None) -> str:
    """Batch 1's and the largest batch's tokens/s and their ratio (busy: the quiet `reference`)."""
    points = sorted(sweep.points, key=lambda p: p.batch) if sweep is not None else []
    if not points:
        return NO_SWEEP_CARDS
    one = points[0]
    first = Card(f"batch {one.batch} tok/s", f"{one.tokens_per_s:.1f}", "measured")
    if len(points) < 2:
        return cards_html([first, Card("largest batch tok/s", WAITING, "next batch size")])
    big = points[-1]
    # a busy run's quiet reference joins the row: the cards keep one row above the chart
    quiet = reference_card(reference, f"batch {big.batch} ÷ {one.batch}", noise)
    quiet = [quiet] if quiet is not None else []
    if big.impossible and sweep.finished:  # measured twice, still impossible: not a result
        return cards_html([first, Card(f"batch {big.batch} tok/s", "—", "impossible"),
                           Card(f"batch {big.batch} ÷ {one.batch}", "—", "not shown")] + quiet
                          ) + "\n\n" + impossible_markdown(big.impossible)
    note = ("busy machine: noisy" if noise is not None and noise.busy else
            {"grows": "grows, measured", "fell": "fell here, measured",
             "levelled": "levelled off, measured"}[throughput_trend(points)]
            if supports_verdict(noise) and sweep.finished else
            "measured" if sweep.finished else "so far, measured")
    return cards_html([  # the ratio of the two figures beside it (paired gain: the closing note)
        first,
        Card(f"batch {big.batch} tok/s", f"{big.tokens_per_s:.1f}", "measured"),
        Card(f"batch {big.batch} ÷ {one.batch}", times(big.tokens_per_s / one.tokens_per_s),
             note),
    ] + quiet)


def impossible_markdown(reason: str) -> str:
    return (f"**Not a possible result**: {reason} This machine was disturbed while measuring "
            "(measured once more: still impossible), so no gain is shown: run the sweep again.")


def shared_sweep_message(when: str, message: str) -> str:
    return (f"Measured earlier on this machine at {when} and shared with every visitor (same "
            f"settings). {message}")


def scheduler_step_markdown(scheduler: str, step) -> str:
    return (f"⏳ {scheduler} batching: forward pass {step.index + 1} ({step.kind}, "
            f"{len(step.rows)} rows, {step.seconds * 1000:.0f} ms) at t = {step.start:.2f} s")


def scheduler_done_markdown(measured_earlier_at: str | None = None) -> str:
    note = ("✅ Both schedulers served every request." if measured_earlier_at is None else
            f"✅ Measured earlier on this machine at {measured_earlier_at}, shared with every "
            "visitor.")
    return f"{note} {VIRTUAL_CLOCK}"


def prompt_labels(lines: Sequence[str], width: int = 24) -> list[str]:
    return [t if len(t) <= width else t[:width - 1] + "…" for t in lines]


def padding_markdown(prompts: int, padded: int, total: int) -> str:
    if not prompts:
        return NO_PROMPTS
    return (f"A batched prefill of these {prompts} prompts computes **{total} positions**, of "
            f"which **{padded} are padding** ({padded / total:.0%} of the work, and of the KV "
            "cache, spent on nothing). The attention mask hides them, so answers are unchanged. "
            "Continuous batching prefills each group of newcomers on its own and trims padding "
            "columns once no row needs them.")


def closing_note(info, sweep, schedules, noise=None) -> str:
    """The closing note from the last finished sweep and scheduler comparison (either None)."""
    if noise is None and sweep is not None:
        noise = getattr(sweep, "noise", None)
    parts = [f"### What this machine showed ({info.device}, {info.dtype}, "
             f"{info.threads} threads)"]
    impossible = next((p.impossible for p in sweep.points if p.impossible), None) \
        if sweep and sweep.points else None
    if impossible:
        parts.append(f"- {impossible_markdown(impossible)}")
    elif sweep and sweep.points:
        one, big = sweep.points[0], sweep.points[-1]
        gain, longer = big.gain_over(one), big.step_seconds / one.step_seconds
        parts.append(cards_html([
            Card(f"Batch {one.batch}", f"{one.tokens_per_s:.1f} tok/s", "measured"),
            Card(f"Batch {big.batch}", f"{big.tokens_per_s:.1f} tok/s", "measured, all rows"),
            Card("Throughput gain", times(gain.estimate), f"each step {longer:.1f}× as long")]))
        parts.append("- " + (f"Decode throughput: **{one.tokens_per_s:.1f} tokens/s at batch "
                             f"{one.batch}**, **{big.tokens_per_s:.1f} tokens/s at batch "
                             f"{big.batch}** ({gain.estimate:.1f}×), while each step took "
                             f"**{longer:.1f}× as long**, measured: gain {gain.label()}, each "
                             "batch's 25th-percentile step against 1-row steps timed right beside "
                             "it, so neither a few slowed steps nor the load changing between "
                             "batch sizes counts."))
        one_thread = [p.batch for p in sweep.points if p.threads == 1]
        if one_thread and info.threads > 1:
            parts.append("- " + (f'Batch {", ".join(map(str, one_thread))} timed at 1 CPU thread: '
                                 f'a quick try found it faster than {info.threads} threads (other '
                                 'programs were using the cores).'))
        if noise is not None and noise.busy:  # the numbers stand; no verdict drawn from them
            parts.insert(1, busy_notice_html(noise))
            parts.append("- No verdict on where batching stops paying from this run.")
        else:
            parts.append(f"- {where_batching_stops_paying(sweep.points)}")
    else:
        parts.append("- Run the batch sweep to fill in throughput at batch 1 and at the "
                     "largest batch.")
    if schedules:
        s, c = schedules.static.summary, schedules.continuous.summary
        parts.append(f"- On the “{schedules.trace}” workload (max batch {schedules.max_batch}): "
                     f"static {_served(s)}; continuous {_served(c)}.")
    else:
        parts.append("- Serve the workload to compare static and continuous batching here.")
    return "\n".join(parts)


NEAR_LINEAR = 0.8  # step time grew at least 80% as fast as the batch: batching stopped paying
MARGIN = 0.05  # within 5% (plus the run's own spread) of that line: too close to call


def _spread(p) -> float:
    """(max - min) ÷ median of a point's timed steps: the run's own noise."""
    times = sorted(p.step_times)
    if len(times) < 2:
        return 0.0
    median = times[len(times) // 2]
    return (times[-1] - times[0]) / median if median > 0 else 0.0


def _pair(a, b) -> tuple[str, float, float]:
    """("stops" | "pays" | "close", rows ratio, step-time ratio) for one step up in batch."""
    rows, slower = b.batch / a.batch, b.step_seconds / a.step_seconds
    edge, tol = NEAR_LINEAR * rows, MARGIN + max(_spread(a), _spread(b))
    return ("stops" if slower >= edge * (1 + tol) else "pays" if slower <= edge * (1 - tol)
            else "close"), rows, slower


def where_batching_stops_paying(points) -> str:
    """The first step up in batch from which every larger one grew the step time clearly past
    `NEAR_LINEAR` of the batch's growth (`MARGIN` plus the run's spread: too close to call)."""
    pts = sorted(points, key=lambda p: p.batch)
    if len(pts) < 2:
        return "Measure more than one batch size to see where batching stops paying."
    pairs = [(a, b, *_pair(a, b)) for a, b in zip(pts, pts[1:])]
    for i, (a, b, _kind, rows, slower) in enumerate(pairs):
        if all(k == "stops" for _, _, k, _, _ in pairs[i:]):
            return (f"Batching stopped paying between batch {a.batch} and {b.batch}: {rows:.0f}× "
                    f"the requests made each step {slower:.1f}× as long, so throughput grew only "
                    f"{rows / slower:.2f}×, and every larger batch measured did the same: each "
                    "extra request adds about its full share of step time.")
    close = next((p for p in pairs if p[2] == "close"), None)
    if close is not None:
        a, b, _, rows, slower = close
        return (f"Too close to call on this run: from batch {a.batch} to {b.batch} the step grew "
                f"{slower:.2f}× for {rows:.0f}× the requests, within this run's noise of the line "
                f"where batching stops paying ({NEAR_LINEAR * rows:.2f}×). Run the sweep again to "
                "see which side it falls on.")
    return (f"Up to batch {pts[-1].batch}, the step time grew clearly less than the batch did: "
            "batching still paid at the largest size measured here (it stops once the step time "
            "grows about in proportion to the batch).")


def _served(s) -> str:
    return (f"{s.throughput:.1f} tokens/s, mean latency {s.mean_latency:.1f} s, p95 "
            f"{s.p95_latency:.1f} s, mean TTFT {s.mean_ttft:.2f} s")
