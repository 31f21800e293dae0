"""How much model work each presenter screen asks for: the tokens its button feeds, counted
from the screen's sizes (`presenter_handlers`' constants) and the experiments' own work formulas,
so the work budget refuses a screen before it runs rather than part-way through."""
from __future__ import annotations

from inference.config import Settings
from inference.experiments.batch_sweep import batch_sweep_tokens
from inference.experiments.context_sweep import decode_lengths_tokens
from inference.experiments.kv_race import race_tokens
from inference.experiments.machine_roofline import ROOFLINE_PROMPT
from inference.experiments.prefill_sweep import DECODE_STEPS, prefill_sweep_tokens
from inference.experiments.quality import greedy_tokens
from inference.experiments.speculative_race import spec_prompt, spec_race_tokens
from inference.experiments.step_bound import step_profile_tokens
from inference.tokens import prompt_ids

from . import presenter_handlers as ph
from .common.measurement import prompt_tokens


def screen_tokens(lm, settings: Settings, measure: str) -> int:
    """The tokens the screen `measure` feeds (0: no model run); the cost screen counts the batch
    sweep it runs when its visitor has none of their own to reuse."""
    def prompt() -> int:
        return prompt_tokens(lm, settings, ph.PROMPT)

    def batch() -> int:
        return batch_sweep_tokens(prompt(), ph.BATCH, ph.BATCH_STEPS)

    work = {
        "answer": lambda: greedy_tokens(prompt_tokens(lm, settings, ph.QUESTION),
                                        ph.DECODE_TOKENS),
        "prefill": lambda: greedy_tokens(prompt(), DECODE_STEPS + 1),
        "prefill_race": lambda: prefill_sweep_tokens([ph.PREFILL_TOKENS], ph.PREFILL_TOKENS),
        "decode": lambda: greedy_tokens(prompt(), ph.DECODE_TOKENS),
        "roofline": lambda: greedy_tokens(len(prompt_ids(lm.tokenizer, ROOFLINE_PROMPT)),
                                          ph.DECODE_TOKENS),
        "speculative": lambda: spec_race_tokens(prompt_tokens(lm, settings, spec_prompt()),
                                                ph.SPEC_TOKENS, ph.SPEC_K, model_draft=False),
        "step_split": lambda: step_profile_tokens(prompt()),
        "kv_bytes": lambda: greedy_tokens(prompt(), ph.DECODE_TOKENS),
        "kv_race": lambda: race_tokens(prompt_tokens(lm, settings, ph.PROMPT,
                                                     settings.race_max_prompt_tokens),
                                       ph.RACE_TOKENS),
        "long_context": lambda: decode_lengths_tokens(ph.LONG_CONTEXT, (1,),
                                                      settings.context_decode_repeats),
        "batch": batch,
        "int8": lambda: 2 * greedy_tokens(prompt(), ph.INT8_TOKENS),
        "cost": batch,
    }
    return work[measure]() if measure in work else 0  # tokenizer-only screens, the recap
