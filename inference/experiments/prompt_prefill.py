"""Lesson 2's one measurement of a learner's prompt: prefill it in one parallel pass, then take
a few decode steps to compare with (device-synced, from the engine's `StepEvent`s).

`measure_prompt` is what the lesson and the presenter call; the prompt arrives as token ids
(checked and chat-templated by the caller)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from ..generation import stream
from .noise import Noise

DECODE_STEPS = 4  # decode steps timed after the prefill, for comparison


@dataclass(frozen=True)
class PrefillMeasurement:
    """One prefill of the learner's prompt and the decode steps after it (seconds, synced)."""

    prompt_tokens: int
    prefill_seconds: float  # the forward pass over the whole prompt
    ttft_seconds: float  # prefill + choosing the first token
    decode_step_seconds: float | None  # median decode step (None: the answer ended at once)
    decode_steps: int
    events: tuple = ()  # the measured StepEvents, the prefill first (for the diagram)
    prompt_ids: tuple[int, ...] = ()
    noise: Noise | None = None  # the noise rule's reading around it, where the caller took one


def measure_prompt(lm, ids: list[int], decode_steps: int = DECODE_STEPS) -> PrefillMeasurement:
    """Prefill the prompt's ids, then take `decode_steps` decode steps to compare with."""
    first, *rest = stream(lm, ids, max_new_tokens=decode_steps + 1)
    return PrefillMeasurement(
        prompt_tokens=len(ids), prefill_seconds=first.forward_seconds, ttft_seconds=first.seconds,
        decode_step_seconds=statistics.median(e.seconds for e in rest) if rest else None,
        decode_steps=len(rest), events=(first, *rest), prompt_ids=tuple(ids))
