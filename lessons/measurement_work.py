"""How much work each measurement's settings ask for: tokens fed through the model, all passes
together (tokens × passes), so the work budget (`Settings.measure_work_tokens`) is checked
before a run starts (`lessons.common.measure_limits.over_budget`).

Each entry reads the event's raw settings as the visitor sent them (by elem_id or label, or
by position) and counts the tokens of every forward pass the measurement will run:

- KV race: the cached lane feeds the prompt once and then one token a step; the recomputing
  lane feeds the whole sequence every step: P + n + Σ_{i<n} (P + i).
- Batch sweep: each batch size b prefills b copies of the prompt, then decodes `steps` steps
  of b tokens each: Σ_b b·(P + steps).
- Prefill sweep: one pass of L tokens per length, and L one-token passes up to the slider.
- Quantization: each mode generates P + n tokens and scores them against float32 (twice).

>>> race_tokens(prompt=20, new=48)
2156
"""
from __future__ import annotations

from .batching_handlers import SWEEP_PROMPT, sweep_sizes
from .common.prompt_input import encode_prompt


def race_tokens(prompt: int, new: int) -> int:
    """Tokens both lanes of the KV race feed through the model."""
    return (prompt + new) + new * prompt + new * (new - 1) // 2


def _prompt_tokens(lm, settings, text) -> int:
    return len(encode_prompt(lm, settings, str(text)))


def kv_race(lm, settings, named: dict, values: list) -> int:
    return race_tokens(_prompt_tokens(lm, settings, values[0]), int(values[1]))


def batch_sweep(lm, settings, named: dict, values: list) -> int:
    largest, steps = int(named["batch-sweep-max"]), int(named["batch-sweep-steps"])
    prompt = _prompt_tokens(lm, settings, SWEEP_PROMPT)
    return sum(b * (prompt + steps) for b in sweep_sizes(largest))


def prefill_sweep(lm, settings, named: dict, values: list) -> int:
    lengths, most = [int(x) for x in values[0] or []], int(values[1])
    return sum(lengths) + sum(n for n in lengths if n <= most)


def quant_compare(lm, settings, named: dict, values: list) -> int:
    modes, new = list(values[1] or []), int(values[2])
    return 2 * len(modes) * (_prompt_tokens(lm, settings, values[0]) + new)


WORK = {"kv_race": kv_race, "batch_sweep": batch_sweep, "prefill_sweep": prefill_sweep,
        "quant_compare": quant_compare}
