"""What a Present screen shows of its measurement: a `Step` line while it runs ("⏳ token 5 of
16 · first token 131 ms · next tokens 62 ms each so far"), then one `Measured` headline, its label
marked on a busy machine and its ratio called "faster" only past the shared margin. The
measurements themselves are in `presenter_handlers.py`.
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from typing import NamedTuple

from inference.experiments.noise import Noise
from inference.experiments.quiet_reference import QuietFigure
from visualizations.cards import human_bytes, ratio_side
from visualizations.noise_view import BUSY


class Step(NamedTuple):
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
    reference: QuietFigure | None = None  # the quiet figure a busy run's guess is judged by


def busy_label(label: str, judged: Noise) -> str:
    return f"{label} · {BUSY}" if judged.busy else label


def withheld(key: str, why: str, detail: str) -> Measured:
    """A figure physics rules out (`noise.py`) twice: the reason instead of a number."""
    return Measured(key, 0.0, "—", "no figure from this run: it cannot be right",
                    f"{why} Measured twice; press the button again. ({detail})", True)


def first_and_next(events) -> str:
    """The running line while tokens stream: the same two figures as the recap's `first_next`."""
    times = first_next(events)
    first = f"first token {times['first_ms']:.0f} ms"
    median = (f" · next tokens {times['next_ms']:.0f} ms each so far" if len(events) > 1
              else "")
    text = events[-1].text.strip().replace("\n", " ")
    return f"{first}{median} (measured) · “{'…' if len(text) > 48 else ''}{text[-48:]}”"


def cache_running(events) -> str:
    e = events[-1]
    return f"cache {human_bytes(e.cache_bytes)} after {e.cache_tokens} tokens (measured)"


def spec_running(passes) -> str:
    # the prefill, pass 0, makes the first token
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


LAYER = re.compile(r"\blayers\.(\d+)\.")  # a decoder layer's matrix: "model.layers.12.mlp.up_proj"


def build_step(name: str, progress, layers: int) -> Step:
    """A mode's build as "building int8: layers converted 12 of 30" (0 while the model is
    copied, all once past the last layer)."""
    now = LAYER.search(progress.message)
    done = int(now.group(1)) if now else (layers if progress.done else 0)
    return Step(f"building {name}: layers converted", done, layers, progress.message)


def first_next(events) -> dict:
    """The first token's time and the median next token's (ms), for the recap."""
    later = [e.seconds for e in events[1:]]
    return {"first_ms": events[0].seconds * 1000,
            "next_ms": statistics.median(later) * 1000 if later else 0.0}
