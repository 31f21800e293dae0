"""What bounds a decode step on this machine, in one measurement ('This machine').

The profiler's split of a few real decode steps, the fixed cost of one do-nothing operation
(operations per step × this = the dispatch bill), and on a GPU the eager loop raced against the
static-cache step recorded once as a CUDA graph (their greedy tokens must be identical).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ..profile_step import StepProfile, captured_greedy, profile_decode_step, tiny_op_seconds
from .quality import greedy_run
from .roofline import BoundVerdict, decide_bound

PROFILED_STEPS = 4  # decode steps under the profiler (and as many timed without it)
RACE_TOKENS = 128  # the captured race's length on a GPU (a fraction of a second there)
WARM_UP_TOKENS = 8  # each captured-race path's untimed warm-up run


@dataclass(frozen=True)
class CapturedRace:
    new_tokens: int  # tokens each side decoded after the same prompt
    captured: bool  # True: the second side replayed a CUDA graph; False: static cache, eager
    eager_tokens_per_s: float  # the engine's loop (DynamicCache), batch 1
    static_tokens_per_s: float  # the static-cache step, run eagerly
    captured_tokens_per_s: float  # the captured step (equals the eager static run on a CPU)
    capture_seconds: float  # one-off: warm-up steps and recording the graph (0 on a CPU)
    same_tokens: bool  # the captured side chose every token the engine chose
    first_difference_at: int | None  # index of the first differing token, if any

    @property
    def speedup(self) -> float:
        """Captured tokens/s ÷ eager tokens/s."""
        return self.captured_tokens_per_s / self.eager_tokens_per_s


def captured_race(lm, ids: list[int], new_tokens: int = RACE_TOKENS) -> CapturedRace:
    """`new_tokens` greedy tokens each way after a warm-up (on a CPU, static cache eagerly)."""
    greedy_run(lm.model, ids, WARM_UP_TOKENS, lm.device)  # warm-up
    captured_greedy(lm.model, ids, WARM_UP_TOKENS, capture=False)
    eager = greedy_run(lm.model, ids, new_tokens, lm.device)
    static = captured_greedy(lm.model, ids, new_tokens, capture=False)
    on_gpu = lm.device.type == "cuda"
    graph = captured_greedy(lm.model, ids, new_tokens, capture=True) if on_gpu else static
    diff = next((i for i, (a, b) in enumerate(zip(eager.token_ids, graph.token_ids)) if a != b),
                None)
    return CapturedRace(new_tokens, graph.captured, eager.decode_tokens_per_s,
                        static.decode_tokens_per_s, graph.decode_tokens_per_s,
                        graph.capture_seconds, graph.token_ids == eager.token_ids, diff)


@dataclass(frozen=True)
class StepBound:
    profile: StepProfile
    tiny_op_seconds: float  # one do-nothing operation, measured here
    race: CapturedRace | None  # None on a CPU (nothing to capture) or when not asked for

    def verdict(self, floor_seconds: float) -> BoundVerdict:
        """The one rule on this step: its share of the bandwidth roof (floor ÷ step) and of time
        outside the real work (a GPU's idle time between kernels; on a CPU all but matmuls)."""
        p = self.profile
        gpu = p.kernels_per_step is not None and p.device_busy_share is not None
        step = max(p.step_seconds, 1e-12)
        outside = 1 - p.device_busy_share if gpu else 1 - p.matmul_seconds / step
        return decide_bound(floor_seconds / step, None, overhead_share=max(outside, 0.0),
                            device="cuda" if gpu else "cpu")

    @property
    def dispatch_seconds(self) -> float:
        """Theoretical: operations per step × one's fixed cost."""
        return self.profile.ops_per_step * self.tiny_op_seconds


def measure_step_bound(lm, prompt_ids: list[int], steps: int = PROFILED_STEPS,
                       race_tokens: int = RACE_TOKENS) -> StepBound:
    """Profile `steps` decode steps; on a GPU, race the captured step (`race_tokens` 0: no)."""
    profile = profile_decode_step(lm.model, prompt_ids, steps=steps)
    race = (captured_race(lm, prompt_ids, race_tokens)
            if lm.device.type == "cuda" and race_tokens > 0 else None)
    return StepBound(profile, tiny_op_seconds(lm.device), race)


def step_figures(bound: StepBound) -> dict:
    """The measurement as plain figures for a results file."""
    return asdict(bound) | {"between_ops_seconds": bound.profile.between_ops_seconds,
                            "dispatch_seconds": bound.dispatch_seconds}


def step_profile_tokens(prompt: int, steps: int = PROFILED_STEPS) -> int:
    """Tokens `profile_decode_step` feeds: the prefill, a warm-up step, `steps` timed steps
    and `steps` profiled ones (a GPU's captured race adds its own)."""
    return prompt + 1 + 2 * steps
