"""What bounds a decode step on this machine, in one measurement ('This machine').

Three parts, each from its own module: the profiler's split of a few real decode steps
(`profile_step.profile_decode_step`), the fixed cost of one do-nothing operation
(`profile_step.tiny_op_seconds`: operations per step × this = the dispatch bill), and on a GPU
the eager loop raced against the captured step (`captured_race`). On a CPU there is nothing to
capture, so the race is left out (None). `bench.gpu_check` runs this same function on CUDA.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..profile_step import StepProfile, profile_decode_step, tiny_op_seconds
from .captured_race import CapturedRace, captured_race

PROFILED_STEPS = 4  # decode steps under the profiler (and as many timed without it)
RACE_TOKENS = 128  # the captured race's length on a GPU (a fraction of a second there)


@dataclass(frozen=True)
class StepBound:
    profile: StepProfile
    tiny_op_seconds: float  # one do-nothing operation, measured here
    race: CapturedRace | None  # None on a CPU: nothing to capture


def measure_step_bound(lm, prompt_ids: list[int], steps: int = PROFILED_STEPS,
                       race_tokens: int = RACE_TOKENS) -> StepBound:
    """Profile `steps` decode steps after `prompt_ids`; race the captured step on a GPU."""
    profile = profile_decode_step(lm.model, prompt_ids, steps=steps)
    race = captured_race(lm, prompt_ids, race_tokens) if lm.device.type == "cuda" else None
    return StepBound(profile, tiny_op_seconds(lm.device), race)
