"""What a presenter measurement yields, worded: a `Step` between its parts with its running line
("⏳ race step 5 of 64 · with the cache 0.41 s · recomputing everything 1.92 s so far
(measured)"), then one `Measured` headline, its label decided from the measured figure."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from inference.experiments.kv_race import RECOMPUTE
from inference.experiments.noise import Noise
from inference.experiments.quiet_reference import QuietFigure
from visualizations.cards import human_bytes, ratio_side
from visualizations.noise_view import BUSY


@dataclass(frozen=True)
class Step:
    """A long measurement between two parts: "⏳ decode step 5 of 23 · 13.4 tokens/s so far"."""

    counted: str  # what is counted, e.g. "decode step", "token"
    done: int
    total: int
    running: str  # the figure measured so far, e.g. "13.4 tokens/s so far (median)"


@dataclass(frozen=True)
class Measured:
    """One screen's headline: the number, as shown, what it is, and the figures behind it."""

    key: str
    value: float  # the headline number, compared with a guess on predict screens
    shown: str  # e.g. "12.3×", "41 ms"
    label: str  # e.g. "faster in one pass"
    detail: str  # one line of the measured figures behind the headline
    noisy: bool = False  # the machine was busy while measuring (noise.py): no verdict drawn
    figures: dict = field(default_factory=dict)  # plain numbers the cost screen or recap reads
    reference: QuietFigure | None = None  # this machine's quiet figure, a busy run's guess is
    # judged against (a dict in the record)

    def as_dict(self) -> dict:
        return asdict(self)


def busy_label(label: str, judged: Noise) -> str:
    return f"{label} · {BUSY}" if judged.busy else label


def withheld(key: str, why: str, detail: str) -> Measured:
    """A figure physics rules out (`sanity.py`) twice: the reason instead of a number."""
    return Measured(key, 0.0, "—", "no figure from this run: it cannot be right",
                    f"{why} Measured twice; press the button again. ({detail})", True)


def first_and_next(events) -> str:
    """A streamed answer so far: the first token's time, the next tokens' median, the text."""
    first = f"first token {events[0].seconds * 1000:.0f} ms"
    later = sorted(e.seconds for e in events[1:])
    median = f" · next tokens {later[len(later) // 2] * 1000:.0f} ms each so far" if later else ""
    text = events[-1].text.strip().replace("\n", " ")
    return f"{first}{median} (measured) · “{'…' if len(text) > 48 else ''}{text[-48:]}”"


def cache_running(events) -> str:
    e = events[-1]
    return f"cache {human_bytes(e.cache_bytes)} after {e.cache_tokens} tokens (measured)"


def prefill_running(progress) -> str:
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
    """A time ratio's label: "faster …" only above the shared margin (`ratio_side`), else the
    ratio named `plain`ly, "not faster on this run"; on a busy run, plainly with the notice.

    >>> ratio_label(0.9, "faster with the cache", "recomputing ÷ cached", "24 tokens")
    'recomputing ÷ cached (24 tokens): not faster on this run'
    """
    if judged is not None and judged.busy:
        return f"{plain} ({what}): {BUSY}"
    return (f"{faster} ({what})" if ratio_side(ratio) == "faster"
            else f"{plain} ({what}): not faster on this run")


def race_running(steps) -> str:
    cached = sum(t.seconds for t in steps if t.lane != RECOMPUTE)
    again = sum(t.seconds for t in steps if t.lane == RECOMPUTE)
    return (f"with the cache {cached:.2f} s · recomputing everything {again:.2f} s so far "
            "(measured)")


def long_running(points, repeats: int) -> str:
    steps = " · ".join(f"{p.cache_tokens:,} cached tokens: {p.seconds * 1000:.1f} ms a step"
                       for p in points)
    return f"{steps} (measured, " + (f"median of {repeats} runs)" if repeats > 1 else "one run)")


def batch_running(update) -> str:
    if not update.points:
        return update.message  # e.g. "Batch 1: prefilling 1 × 20 prompt tokens…"
    p = update.points[-1]
    return f"batch {p.batch}: {p.tokens_per_s:.1f} tokens/s (measured) · {update.message}"


LAYER = re.compile(r"\blayers\.(\d+)\.")  # a decoder layer's matrix: "model.layers.12.mlp.up_proj"


def build_step(name: str, progress, layers: int) -> Step:
    """A mode's build as "building int8: layers converted 12 of 30": the layers before the one
    being converted (0 while the model is copied, all once past the last layer)."""
    now = LAYER.search(progress.message)
    done = int(now.group(1)) if now else (layers if progress.done else 0)
    return Step(f"building {name}: layers converted", done, layers, progress.message)


def int8_running(run, fp32=None) -> str:
    now = (f"{run.decode_tokens_per_s:.1f} tokens/s so far (measured)" if run.step_seconds
           else f"prefill {run.prefill_seconds * 1000:.0f} ms, the first token (measured)")
    return now if fp32 is None else f"{now} · float32 {fp32.decode_tokens_per_s:.1f} tokens/s"
