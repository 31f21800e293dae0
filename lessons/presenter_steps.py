"""The presenter's running lines: what a long screen shows between its parts ("⏳ race step 5
of 64 · with the cache 0.41 s · recomputing everything 1.92 s so far (measured)"), built from
the items its measurement yields, and the headline labels decided from a measured ratio.
`presenter_handlers` runs the measurements; these only word what they have measured so far."""
from __future__ import annotations

import re
from dataclasses import dataclass

from inference.experiments.kv_race import RECOMPUTE
from inference.experiments.noise import Noise
from visualizations.cards import human_bytes, ratio_side
from visualizations.noise_view import BUSY


@dataclass(frozen=True)
class Step:
    """A long measurement between two parts: `counted` `done` of `total` and the number so far
    (shown as "⏳ decode step 5 of 23 · 13.4 tokens/s so far")."""

    counted: str  # what is counted, e.g. "decode step", "token"
    done: int
    total: int
    running: str  # the running figure, measured so far, e.g. "13.4 tokens/s so far (median)"


def first_and_next(events) -> str:
    """A streamed answer so far: the first token's time (the prefill), the next tokens' median
    time (measured), and the newest words of the text."""
    first = f"first token {events[0].seconds * 1000:.0f} ms"
    later = sorted(e.seconds for e in events[1:])
    median = f" · next tokens {later[len(later) // 2] * 1000:.0f} ms each so far" if later else ""
    text = events[-1].text.strip().replace("\n", " ")
    return f"{first}{median} (measured) · “{'…' if len(text) > 48 else ''}{text[-48:]}”"


def cache_running(events) -> str:
    """The KV cache as it grows: its bytes after the tokens so far (measured)."""
    e = events[-1]
    return f"cache {human_bytes(e.cache_bytes)} after {e.cache_tokens} tokens (measured)"


def prefill_running(progress) -> str:
    """The one pass and the tokens fed one at a time so far, both measured (ms)."""
    if progress.feeding:
        one, fed, so_far = progress.one_pass_seconds, progress.fed_seconds, " so far"
    else:
        p = progress.points[-1]
        one, fed, so_far = p.parallel_seconds, p.sequential_seconds, ""
    return (f"one pass {one * 1000:.0f} ms · one token at a time {fed * 1000:.0f} ms{so_far} "
            "(measured)")


def spec_running(passes) -> str:
    """Tokens per verification pass so far (the prefill, pass 0, makes the first token)."""
    verified = len(passes) - 1
    if verified < 1:
        return "the prefill made the first token"
    made = passes[-1].tokens_so_far - passes[0].tokens_so_far
    return (f"{made / verified:.2f} tokens per pass so far ({made} tokens in {verified} "
            f"pass{'es' if verified != 1 else ''})")


def ratio_label(ratio: float, faster: str, plain: str, what: str,
                judged: Noise | None = None) -> str:
    """A measured time ratio's label, decided from the number: "faster …" only when it is above
    the shared margin (`ratio_side`), else the ratio named plainly and said to be not faster on
    this run; on a run the noise rule judged busy (`judged`), named plainly with the notice.

    >>> ratio_label(8.0, "faster in one pass", "one at a time ÷ one pass", "128 tokens")
    'faster in one pass (128 tokens)'
    >>> ratio_label(0.9, "faster with the cache", "recomputing ÷ cached", "24 tokens")
    'recomputing ÷ cached (24 tokens): not faster on this run'
    """
    if judged is not None and judged.busy:
        return f"{plain} ({what}): {BUSY}"
    return (f"{faster} ({what})" if ratio_side(ratio) == "faster"
            else f"{plain} ({what}): not faster on this run")


def race_running(steps) -> str:
    """Both lanes' measured seconds so far (the cached lane, then recomputing everything)."""
    cached = sum(t.seconds for t in steps if t.lane != RECOMPUTE)
    again = sum(t.seconds for t in steps if t.lane == RECOMPUTE)
    return (f"with the cache {cached:.2f} s · recomputing everything {again:.2f} s so far "
            "(measured)")


def long_running(points, repeats: int) -> str:
    """Each cache length measured so far, longest first: its one decode step (median)."""
    steps = " · ".join(f"{p.cache_tokens:,} cached tokens: {p.seconds * 1000:.1f} ms a step"
                       for p in points)
    return f"{steps} (measured, " + (f"median of {repeats} runs)" if repeats > 1 else "one run)")


def batch_running(update) -> str:
    """The newest finished batch size's tokens/s (measured), then what the sweep does now."""
    if not update.points:
        return update.message  # e.g. "Batch 1: prefilling 1 × 20 prompt tokens…"
    p = update.points[-1]
    return f"batch {p.batch}: {p.tokens_per_s:.1f} tokens/s (measured) · {update.message}"


LAYER = re.compile(r"\blayers\.(\d+)\.")  # a decoder layer's matrix: "model.layers.12.mlp.up_proj"


def build_step(name: str, progress, layers: int) -> Step:
    """A mode's build as "building int8: layers converted 12 of 30": the layers before the one
    whose matrices are being converted (0 while the model is copied; all of them for the
    output head, a float cast and the built model); the build's own message beside it."""
    now = LAYER.search(progress.message)
    done = int(now.group(1)) if now else (layers if progress.done else 0)
    return Step(f"building {name}: layers converted", done, layers, progress.message)


def int8_running(run, fp32=None) -> str:
    """A greedy run's decode speed so far (measured), with float32's finished one beside it."""
    now = (f"{run.decode_tokens_per_s:.1f} tokens/s so far (measured)" if run.step_seconds
           else f"prefill {run.prefill_seconds * 1000:.0f} ms, the first token (measured)")
    return now if fp32 is None else f"{now} · float32 {fp32.decode_tokens_per_s:.1f} tokens/s"
