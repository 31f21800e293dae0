"""Lesson 5 text: sweep and scheduler progress, the padding explanation and the closing note
that quotes what this machine measured (the tables live in `batching_tables`)."""
from __future__ import annotations

from collections.abc import Sequence

from .batching_charts import throughput_trend
from .cards import WAITING, Card, cards_html, times
from .noise_view import busy_notice_html, reference_card, supports_verdict

VIRTUAL_CLOCK = ("*Times are on a **virtual clock**: it advances by the measured, synced "
                 "duration of each forward pass (and jumps ahead while the server is idle), so "
                 "arrivals replay the same way on every run. Every step in it really ran on this "
                 "machine.*")
NO_SWEEP_YET = "Run the batch sweep first: costs come from its measured throughput."
NO_PROMPTS = "Type a few prompts, one per line."
NO_SWEEP_CARDS = ("*Batch 1's tokens/s, the largest batch's and their ratio appear here, "
                  "measured, as **Run sweep** measures them.*")


def sweep_progress_markdown(update, message: str) -> str:
    """⏳ or ✅ and the message: one line, right under Run sweep."""
    return f"{'✅' if update.finished else '⏳'} {message}"


def sweep_cards(sweep, noise=None, reference=None) -> str:
    """Batch 1's tokens/s, the largest batch's and their ratio, worded only on a quiet finished
    run (a busy one: the quiet `reference` beside them). Short values: one row on a phone."""
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
    return cards_html([  # the ratio of the two figures shown beside it (the paired gain,
        first,           # with its range, is the closing note's)
        Card(f"batch {big.batch} tok/s", f"{big.tokens_per_s:.1f}", "measured"),
        Card(f"batch {big.batch} ÷ {one.batch}", times(big.tokens_per_s / one.tokens_per_s),
             note),
    ] + quiet)


def impossible_markdown(reason: str) -> str:
    """What stands where an impossible batch figure would (measured twice, still impossible)."""
    return (f"**Not a possible result**: {reason} This machine was disturbed while measuring "
            "(measured once more: still impossible), so no gain is shown: run the sweep again.")


def shared_sweep_message(when: str, message: str) -> str:
    """The progress line for a sweep another visitor already ran with the same settings."""
    return (f"Measured earlier on this machine at {when} and shared with every visitor "
            f"(same settings). {message}")


def scheduler_step_markdown(scheduler: str, step) -> str:
    """One forward pass (a `SchedulerPass`) of the named scheduler, while it runs."""
    return (f"⏳ {scheduler} batching: forward pass {step.index + 1} ({step.kind}, "
            f"{len(step.rows)} rows, {step.seconds * 1000:.0f} ms) at t = {step.start:.2f} s")


def scheduler_done_markdown(measured_earlier_at: str | None = None) -> str:
    """✅ once both schedulers have served the trace (here, or earlier for another visitor)."""
    note = ("✅ Both schedulers served every request." if measured_earlier_at is None else
            f"✅ Measured earlier on this machine at {measured_earlier_at}, shared with every "
            "visitor.")
    return f"{note} {VIRTUAL_CLOCK}"


def prompt_labels(lines: Sequence[str], width: int = 24) -> list[str]:
    """Prompts shortened to `width` characters for a chart's axis."""
    return [t if len(t) <= width else t[:width - 1] + "…" for t in lines]


def padding_markdown(prompts: int, padded: int, total: int) -> str:
    """What left padding costs a batched prefill of `prompts` prompts: `padded` of `total`."""
    if not prompts:
        return NO_PROMPTS
    return (f"A batched prefill of these {prompts} prompts computes **{total} positions**, of "
            f"which **{padded} are padding** ({padded / total:.0%} of the work, and of the KV "
            "cache, spent on nothing). The attention mask hides them, so answers are unchanged. "
            "Continuous batching prefills each group of newcomers on its own and trims padding "
            "columns once no row needs them.")


def closing_note(info, sweep, schedules, noise=None) -> str:
    """The lesson's closing note from what this machine measured in this session: the last
    finished sweep and scheduler comparison (either None). `noise` defaults to the sweep's own
    reading, so a view drawn later (the schedulers) judges it the same."""
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
        parts.append(cards_html([
            Card(f"Batch {one.batch}", f"{one.tokens_per_s:.1f} tok/s", "measured"),
            Card(f"Batch {big.batch}", f"{big.tokens_per_s:.1f} tok/s", "measured, all rows"),
            Card("Throughput gain", times(big.gain_over(one).estimate),
                 f"each step {big.step_seconds / one.step_seconds:.1f}× as long"),
        ]))
        parts.append(f"- Decode throughput: **{one.tokens_per_s:.1f} tokens/s at batch "
                     f"{one.batch}**, **{big.tokens_per_s:.1f} tokens/s at batch {big.batch}** "
                     f"({big.gain_over(one).estimate:.1f}×), while each step took "
                     f"**{big.step_seconds / one.step_seconds:.1f}× as long**, measured: gain "
                     f"{big.gain_over(one).label()}, each batch's 25th-percentile step set "
                     "against 1-row steps timed right beside it, so neither a few slowed steps "
                     "nor the machine's load changing between batch sizes counts.")
        one_thread = [p.batch for p in sweep.points if p.threads == 1]
        if one_thread and info.threads > 1:
            parts.append(f"- Batch {', '.join(map(str, one_thread))} timed at 1 CPU thread: a "
                         f"quick try found it faster than {info.threads} threads (other "
                         "programs were using the cores).")
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
    """Relative spread of a point's timed steps ((max - min) ÷ median): the run's own noise."""
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
    """Where the step time starts growing about in proportion to the batch (≥ 80% of the
    batch's growth): the first step up from which every larger batch did so, each clearly past
    the line (by `MARGIN` plus the run's own spread); within that band, too close to call."""
    pts = sorted(points, key=lambda p: p.batch)
    if len(pts) < 2:
        return "Measure more than one batch size to see where batching stops paying."
    pairs = [(a, b, *_pair(a, b)) for a, b in zip(pts, pts[1:])]
    for i, (a, b, _kind, rows, slower) in enumerate(pairs):
        if all(k == "stops" for _, _, k, _, _ in pairs[i:]):
            return (f"Batching stopped paying between batch {a.batch} and {b.batch}: "
                    f"{rows:.0f}× the requests made each step {slower:.1f}× as long, so "
                    f"throughput grew only {rows / slower:.2f}×, and every larger batch measured "
                    "did the same. From there each extra request adds about its full share of "
                    "step time.")
    close = next((p for p in pairs if p[2] == "close"), None)
    if close is not None:
        a, b, _, rows, slower = close
        return (f"Too close to call on this run: from batch {a.batch} to {b.batch} the step "
                f"grew {slower:.2f}× for {rows:.0f}× the requests, within this run's noise of "
                f"the line where batching stops paying ({NEAR_LINEAR * rows:.2f}×). Run the "
                "sweep again to see which side it falls on.")
    return (f"Up to batch {pts[-1].batch}, the step time grew clearly less than the batch did: "
            "batching still paid at the largest size measured here (it stops once the step "
            "time grows about in proportion to the batch).")


def _served(s) -> str:
    return (f"{s.throughput:.1f} tokens/s, mean latency {s.mean_latency:.1f} s, p95 "
            f"{s.p95_latency:.1f} s, mean TTFT {s.mean_ttft:.2f} s")
