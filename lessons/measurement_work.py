"""How much work each measurement's settings ask for: tokens fed through the model, all passes
together (tokens × passes), so the work budget (`Settings.measure_work_tokens`) is checked
before a run starts (`classroom.measure_limits.over_budget`). Every event of the heavy
lane has an entry in `WORK` (tests/test_measure_budget.py fails for one without).

Each entry reads the event's raw settings as the visitor sent them and calls the work formula
that lives beside the experiment loop it counts (`inference.experiments.*`: `race_tokens`,
`batch_sweep_tokens`, ...). Where the count depends on what the model answers (an early end of
turn, guesses kept), the formula counts the most it can be. Only the model's forward passes
count: the machine's bandwidth and matmul figures and building a quantized copy run none.
"""
from __future__ import annotations

from inference.config import Settings
from inference.experiments.attention_memory import attention_memory_tokens
from inference.experiments.batch_sweep import batch_sweep_tokens
from inference.experiments.context_sweep import decode_lengths_tokens, prefill_lengths_tokens
from inference.experiments.kv_race import race_tokens
from inference.experiments.machine_roofline import ROOFLINE_PROMPT, roofline_tokens
from inference.experiments.prefill_sweep import prefill_sweep_tokens
from inference.experiments.prefix_reuse import prefix_reuse_tokens
from inference.experiments.prompt_prefill import DECODE_STEPS
from inference.experiments.quality import greedy_tokens, load_perplexity_text, quant_tokens
from inference.experiments.race_lengths import race_lengths_tokens
from inference.experiments.schedulers import schedulers_tokens
from inference.experiments.spec_workload import spec_prompt
from inference.experiments.speculative_batch import spec_batch_tokens
from inference.experiments.speculative_race import spec_race_tokens
from inference.experiments.step_bound import step_profile_tokens
from inference.tokens import prompt_ids

from . import context_handlers as context
from . import presenter_handlers as presenter
from . import presenter_progress
from .batching_handlers import SWEEP_PROMPT, workload_trace
from .common.presenter_screens import load_screens
from .common.prompt_input import encode_prompt
from .quantization_handlers import MAX_PROMPT_TOKENS, chosen_modes


def _prompt_tokens(lm, settings: Settings, text, max_tokens: int | None = None) -> int:
    return len(encode_prompt(lm, settings, str(text), max_tokens))


# One entry per heavy event: (lm, settings, named values, values in order) -> tokens.

def kv_race(lm, settings, named: dict, values: list) -> int:
    return race_tokens(_prompt_tokens(lm, settings, values[0]), int(values[1]))


def first_race(lm, settings, named: dict, values: list) -> int:
    prompt = _prompt_tokens(lm, settings, values[0], settings.race_max_prompt_tokens)
    return race_tokens(prompt, settings.live_race_new_tokens)


def kv_race_lengths(lm, settings, named: dict, values: list) -> int:
    return race_lengths_tokens()


def kv_prefix(lm, settings, named: dict, values: list) -> int:
    system, questions, new = str(values[0]), str(values[1] or ""), int(values[2])
    lines = [q.strip() for q in questions.splitlines() if q.strip()][:settings.max_lines]
    return prefix_reuse_tokens(lm.tokenizer, system, lines, new)


def batch_sweep(lm, settings, named: dict, values: list) -> int:
    largest, steps = int(named["batch-sweep-max"]), int(named["batch-sweep-steps"])
    prompt = _prompt_tokens(lm, settings, SWEEP_PROMPT)
    return batch_sweep_tokens(prompt, largest, steps)


def batch_schedulers(lm, settings, named: dict, values: list) -> int:
    trace, _ = workload_trace(lm, settings, named["batch-sched-workload"],
                              named["Seed (random trace)"], named["Requests (random trace)"],
                              named["Arrivals per second (random trace)"])
    return schedulers_tokens([len(r.prompt_ids) for r in trace],
                             [r.max_new_tokens for r in trace])


def prefill_sweep(lm, settings, named: dict, values: list) -> int:
    lengths = [int(x) for x in values[0] or []] or [8, 32, 128]  # the handler's own fallback
    return prefill_sweep_tokens(lengths, int(values[1]))


def context_prefill(lm, settings, named: dict, values: list) -> int:
    return prefill_lengths_tokens(context.sweep_prefill_lengths(lm, settings, values[0]),
                                  settings.context_prefill_repeats)


def context_decode(lm, settings, named: dict, values: list) -> int:
    return decode_lengths_tokens(context.sweep_decode_lengths(lm, settings, values[0]),
                                 settings.context_decode_batches,
                                 settings.context_decode_repeats)


def context_memory(lm, settings, named: dict, values: list) -> int:
    return attention_memory_tokens(context.sweep_prefill_lengths(lm, settings, values[0])[-1],
                                   settings.context_eager_max_tokens)


def speculative_race(lm, settings, named: dict, values: list) -> int:
    prompt, draft, k, new = values[0], values[1], int(values[2]), int(values[3])
    return spec_race_tokens(_prompt_tokens(lm, settings, prompt), new, k,
                            model_draft=draft != "prompt_lookup")


def speculative_sweep(lm, settings, named: dict, values: list) -> int:
    prompt, new = _prompt_tokens(lm, settings, values[0]), int(values[1])
    ks = range(settings.spec_k.low, settings.spec_k.high + 1)
    return sum(spec_race_tokens(prompt, new, k, model_draft) for k in ks
               for model_draft in (False, True))


def speculative_batch(lm, settings, named: dict, values: list) -> int:
    return spec_batch_tokens(_prompt_tokens(lm, settings, values[0]), int(values[1]),
                             settings.spec_batches)


def quant_compare(lm, settings, named: dict, values: list) -> int:
    prompt = _prompt_tokens(lm, settings, values[0], MAX_PROMPT_TOKENS)
    text = len(lm.tokenizer(load_perplexity_text(), add_special_tokens=False)["input_ids"])
    return quant_tokens(prompt, int(values[2]), len(chosen_modes(values[1])), text)


def roofline(lm, settings, named: dict, values: list) -> int:
    return roofline_tokens(len(prompt_ids(lm.tokenizer, ROOFLINE_PROMPT)),
                           lm.device.type == "cuda")


def presenter_screen_tokens(lm, settings: Settings, measure: str) -> int:
    """The tokens the presenter screen `measure` feeds (0: no model run), from the constants
    of `presenter_handlers`; the cost screen counts the batch sweep it may run."""
    p = presenter

    def prompt() -> int:
        return _prompt_tokens(lm, settings, p.PROMPT)

    def batch() -> int:
        return batch_sweep_tokens(prompt(), p.BATCH, p.BATCH_STEPS)

    work = {
        "answer": lambda: greedy_tokens(_prompt_tokens(lm, settings, p.QUESTION),
                                        p.DECODE_TOKENS),
        "prefill": lambda: greedy_tokens(prompt(), DECODE_STEPS + 1),
        "prefill_race": lambda: prefill_sweep_tokens([p.PREFILL_TOKENS], p.PREFILL_TOKENS),
        "decode": lambda: greedy_tokens(prompt(), p.DECODE_TOKENS),
        "roofline": lambda: greedy_tokens(len(prompt_ids(lm.tokenizer, ROOFLINE_PROMPT)),
                                          p.DECODE_TOKENS),
        "speculative": lambda: spec_race_tokens(_prompt_tokens(lm, settings, spec_prompt()),
                                                p.SPEC_TOKENS, p.SPEC_K, model_draft=False),
        "step_split": lambda: step_profile_tokens(prompt()),
        "kv_bytes": lambda: greedy_tokens(prompt(), p.DECODE_TOKENS),
        "kv_race": lambda: race_tokens(_prompt_tokens(lm, settings, p.PROMPT,
                                                      settings.race_max_prompt_tokens),
                                       p.RACE_TOKENS),
        "long_context": lambda: decode_lengths_tokens(p.LONG_CONTEXT, (1,),
                                                      settings.context_decode_repeats),
        "batch": batch,
        "int8": lambda: 2 * greedy_tokens(prompt(), p.INT8_TOKENS),
        "cost": batch,
    }
    return work[measure]() if measure in work else 0  # tokenizer-only screens, the recap


def presenter_measure(lm, settings, named: dict, values: list) -> int:
    _, screen = presenter_progress.at(load_screens(lm.info), presenter_progress.clean(values[0]))
    return presenter_screen_tokens(lm, settings, screen.measure)


WORK = {f.__name__: f for f in (
    first_race, prefill_sweep, speculative_race, speculative_sweep, speculative_batch, kv_race,
    kv_race_lengths, kv_prefix, context_prefill, context_decode, context_memory, batch_sweep,
    batch_schedulers, quant_compare, roofline, presenter_measure)}
# Events whose lesson itself offers more work than `Settings.measure_work_tokens` (32,768),
# with their own budget (api_name -> tokens) and why. Every other page's largest offer fits
# the app's budget; tests/test_measure_budget.py checks each page's defaults and largest
# offer against these and names any that does not fit.
BUDGETS: dict[str, int] = {
    # The k sweep races both drafts at every k (16 races). At the slider's 256 new tokens on
    # the lesson's own edit prompt it counts 44,788 tokens at most (every guess rejected; the
    # edit prompt's guesses are mostly kept, so a real run feeds far less). 49,152 lets a
    # prompt ~100 tokens longer than the edit prompt sweep to 256 tokens too; a long typed
    # prompt (each of its tokens is fed about 40 times over the sweep) is refused.
    "speculative_sweep": 49_152,
}
