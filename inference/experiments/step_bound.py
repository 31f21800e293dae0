"""What bounds a decode step on this machine, in one measurement ('This machine').

Three parts, each from its own module: the profiler's split of a few real decode steps
(`profile_step.profile_decode_step`), the fixed cost of one do-nothing operation
(`profile_step.tiny_op_seconds`: operations per step × this = the dispatch bill), and on a GPU
the eager loop raced against the captured step (`captured_race`). On a CPU there is nothing to
capture, so the race is left out (None). `make bench` and `bench.gpu_check` record the same
measurement (`step_figures`); the GPU check races the captured step in a section of its own.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ..profile_step import StepProfile, profile_decode_step, tiny_op_seconds
from .bound_rule import BoundVerdict, decide_bound
from .captured_race import CapturedRace, captured_race

PROFILED_STEPS = 4  # decode steps under the profiler (and as many timed without it)
RACE_TOKENS = 128  # the captured race's length on a GPU (a fraction of a second there)


@dataclass(frozen=True)
class StepBound:
    profile: StepProfile
    tiny_op_seconds: float  # one do-nothing operation, measured here
    race: CapturedRace | None  # None on a CPU (nothing to capture) or when not asked for

    def verdict(self, floor_seconds: float) -> BoundVerdict:
        """What bounds this step, by the one rule: its share of the bandwidth roof (floor ÷
        step) and the share of the step outside the weight-reading work (on a GPU the time it
        was idle between kernels; on a CPU everything but the matrix products)."""
        p = self.profile
        gpu = p.kernels_per_step is not None and p.device_busy_share is not None
        step = max(p.step_seconds, 1e-12)
        outside = 1 - p.device_busy_share if gpu else 1 - p.matmul_seconds / step
        return decide_bound(floor_seconds / step, None, overhead_share=max(outside, 0.0),
                            device="cuda" if gpu else "cpu")

    @property
    def dispatch_seconds(self) -> float:
        """The dispatch bill of one step (theoretical): operations per step × one's fixed cost."""
        return self.profile.ops_per_step * self.tiny_op_seconds


def measure_step_bound(lm, prompt_ids: list[int], steps: int = PROFILED_STEPS,
                       race_tokens: int = RACE_TOKENS) -> StepBound:
    """Profile `steps` decode steps after `prompt_ids`; on a GPU, race the captured step over
    `race_tokens` tokens (0: no race)."""
    profile = profile_decode_step(lm.model, prompt_ids, steps=steps)
    race = (captured_race(lm, prompt_ids, race_tokens)
            if lm.device.type == "cuda" and race_tokens > 0 else None)
    return StepBound(profile, tiny_op_seconds(lm.device), race)


def step_figures(bound: StepBound) -> dict:
    """The measurement as plain figures for a results file (`make bench`, `bench.gpu_check`)."""
    return asdict(bound) | {"between_ops_seconds": bound.profile.between_ops_seconds,
                            "dispatch_seconds": bound.dispatch_seconds}


def step_profile_tokens(prompt: int, steps: int = PROFILED_STEPS) -> int:
    """Tokens `profile_decode_step` feeds on a CPU: the prefill, a warm-up step and `steps`
    timed steps, then `steps` profiled ones (a GPU's captured race adds its own).

    >>> step_profile_tokens(prompt=20)
    29
    """
    return prompt + 1 + 2 * steps
