"""How much work each measurement's settings ask for: tokens fed through the model, all passes
together (tokens × passes), so the work budget (`Settings.measure_work_tokens`) is checked
before a run starts (`classroom.measure_limits.over_budget`). Every event of the heavy
lane has an entry in `WORK` (tests/test_measure_budget.py fails for one without).

Each entry reads the event's raw settings as the visitor sent them (by elem_id or label, or
by position) and counts the tokens of every forward pass the measurement will run, warm-ups
included. P is the prompt's tokens (chat template included), n the new tokens. A greedy run
of n tokens feeds P, then n − 1 single tokens: P + n − 1. Where the count depends on what the
model answers (an early end of turn, guesses kept), the entry counts the most it can be.
Only the model's forward passes count: the machine's bandwidth and matmul figures (measured
once per process) and building a quantized copy run none.

- KV race: a warm-up of 8; the cached lane feeds the prompt once and then one token a step;
  the recomputing lane feeds the whole sequence every step: 8 + P + n − 1 + Σ_{i<n} (P + i).
  The first screen's race ("Now without the cache", `first_race`) is the same race with
  `Settings.live_race_new_tokens` steps.
- Race at several lengths (`kv_race_lengths`, fixed): a warm-up of 8, then at each length L
  (32, 128, 512) an untimed prefill of L, 3 cached steps and 3 recomputes of L + 1 tokens.
- Prefix reuse (`kv_prefix`): the shared prefix once, then per question its whole prompt twice
  and its answer twice (`prefix_reuse.prefix_request_tokens`, the lesson's own count).
- Batch sweep: each batch size b prefills b copies of the prompt, then decodes one warm-up
  step and `steps` timed steps of b tokens each: Σ_b b·(P + steps + 1).
- Static vs continuous (`batch_schedulers`): both serve the whole trace. Static batching
  computes every row of a batch at the batch's padded width W and for its longest output N;
  continuous batching prefills each request at most at W and decodes it for its own n_r:
  R·(2W + N) + Σ_r n_r over the trace's R requests.
- Prefill sweep: a warm-up of 8, two timed passes of L tokens per length, L one-token passes
  for each length up to the slider (16 to extrapolate from if none is).
- Long context: prefill sweep (`context_prefill`): a warm-up of 8, one pass of L tokens per
  length (× the repeats). Decode sweep: one prefill of the longest cache, then per batch b one
  warm-up step and `repeats` steps per cache length, b tokens each. Attention's memory: the
  same prefill twice (sdpa, eager), at most `context_eager_max_tokens`.
- Speculative race: an untimed warm-up (P + 3, and 8), the speculative lane's prefill and at
  most n − 1 passes of k + 1 tokens (every guess rejected), the plain lane's greedy run; a draft
  model (int4) feeds its own prompt and then k + 1 tokens per pass at most:
  3P + (n − 1)(k + 2) + 11, and 2P + (n − 1)(k + 1) + 3 more with a draft model.
  The k sweep is that race for both drafts at every k; the batch measurement prefills b copies
  of the prompt, then times `REPEATS` + 1 rounds of a plain step and a k + 1 token pass:
  Σ_b b·(P + (REPEATS + 1)(k + 2)).
- Quantization: per mode (float32 always among them, first) a warm-up run of 2, its greedy run,
  its teacher-forced pass and the perplexity text's T tokens: modes·(3P + 2n − 1 + T). float32's
  own greedy run and teacher-forced pass are the reference the others are compared with.
- This machine (`roofline`, fixed): 24 greedy tokens of its prompt, three 256-token prefills,
  a profiled decode (a prefill, 5 steps and 4 profiled); on a GPU the captured race adds five
  greedy runs (two of 8 tokens, three of 128).
- Presenter (`presenter_measure`): the screen's own measurement, fixed by its constants
  (`presenter_screen_tokens`).

>>> race_tokens(prompt=20, new=48)
2163
>>> prefill_sweep_tokens([1, 8, 32, 128, 512], most=32)
1411
>>> spec_race_tokens(prompt=107, new=64, k=4, model_draft=False)
710
>>> schedulers_tokens(prompts=[10, 20], outputs=[5, 8])
109
"""
from __future__ import annotations

from collections.abc import Sequence

from inference.config import Settings
from inference.experiments import captured_race, race_lengths, speculative_batch, step_bound
from inference.experiments.batch_sweep import sweep_sizes
from inference.experiments.machine_roofline import (
    PREFILL_TOKENS,
    ROOFLINE_NEW_TOKENS,
    ROOFLINE_PROMPT,
)
from inference.experiments.prefix_reuse import prefix_request_tokens, shared_prefix_ids
from inference.experiments.prompt_prefill import DECODE_STEPS
from inference.experiments.quality import load_perplexity_text
from inference.experiments.spec_workload import spec_prompt
from inference.tokens import prompt_ids

from . import context_handlers as context
from . import presenter_handlers as presenter
from . import presenter_progress
from .batching_handlers import SWEEP_PROMPT, workload_trace
from .common.presenter_screens import load_screens
from .common.prompt_input import encode_prompt
from .quantization_handlers import MAX_PROMPT_TOKENS, chosen_modes

WARM_UP = 8  # tokens of the untimed warm-up pass most measurements start with
NO_LIMIT = 2**62  # prefix_request_tokens' budget when only its count is wanted


def greedy_tokens(prompt: int, new: int) -> int:
    """A greedy run of `new` tokens: the prompt's prefill, then one token a step."""
    return prompt + new - 1


def race_tokens(prompt: int, new: int) -> int:
    """Tokens both lanes of the KV race feed through the model, its warm-up included."""
    return WARM_UP + greedy_tokens(prompt, new) + new * prompt + new * (new - 1) // 2


def race_lengths_tokens(lengths: Sequence[int] = race_lengths.LENGTHS,
                        repeats: int = race_lengths.REPEATS) -> int:
    """The race at several lengths: a prefill, cached steps and recomputes at each length."""
    return WARM_UP + sum(n + repeats + repeats * (n + 1) for n in lengths)


def prefill_sweep_tokens(lengths: Sequence[int], most: int, repeats: int = 2) -> int:
    """Lesson 2's sweep: `repeats` timed passes per length, one-at-a-time up to `most`."""
    lengths = sorted(set(lengths))
    fed = [n for n in lengths if n <= most]
    return WARM_UP + repeats * sum(lengths) + sum(fed) + (16 if lengths and not fed else 0)


def batch_sweep_tokens(prompt: int, sizes: Sequence[int], steps: int) -> int:
    return sum(b * (prompt + steps + 1) for b in sizes)


def schedulers_tokens(prompts: Sequence[int], outputs: Sequence[int]) -> int:
    """Both schedulers on one trace (prompt and output lengths per request), at most."""
    width, longest = max(prompts, default=0), max(outputs, default=0)
    return len(prompts) * (2 * width + longest) + sum(outputs)


def spec_race_tokens(prompt: int, new: int, k: int, model_draft: bool) -> int:
    """One speculative race, both lanes and the warm-up, every guess rejected (the most)."""
    lanes = 3 * prompt + (new - 1) * (k + 2) + 3 + WARM_UP
    return lanes + (2 * prompt + (new - 1) * (k + 1) + 3 if model_draft else 0)


def spec_batch_tokens(prompt: int, k: int, batches: Sequence[int],
                      repeats: int = speculative_batch.REPEATS) -> int:
    return sum(b * (prompt + (repeats + 1) * (k + 2)) for b in batches)


def context_decode_tokens(lengths: Sequence[int], batches: Sequence[int], repeats: int) -> int:
    steps = 1 + len(set(lengths)) * max(1, repeats)
    return max(max(lengths), 1) + sum(b * steps for b in set(batches))


def quant_tokens(prompt: int, new: int, modes: int, text: int) -> int:
    return modes * (3 * prompt + 2 * new - 1 + text)


def step_profile_tokens(prompt: int, steps: int = step_bound.PROFILED_STEPS) -> int:
    """A profiled decode: the prefill, a warm-up and `steps` timed steps, `steps` profiled."""
    return prompt + 1 + 2 * steps


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
    return len(shared_prefix_ids(lm.tokenizer, system)) + prefix_request_tokens(
        lm.tokenizer, system, lines, new, NO_LIMIT)


def batch_sweep(lm, settings, named: dict, values: list) -> int:
    largest, steps = int(named["batch-sweep-max"]), int(named["batch-sweep-steps"])
    prompt = _prompt_tokens(lm, settings, SWEEP_PROMPT)
    return batch_sweep_tokens(prompt, sweep_sizes(largest), steps)


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
    lengths = context.sweep_prefill_lengths(lm, settings, values[0])
    return WARM_UP + max(1, settings.context_prefill_repeats) * sum(lengths)


def context_decode(lm, settings, named: dict, values: list) -> int:
    return context_decode_tokens(context.sweep_decode_lengths(lm, settings, values[0]),
                                 settings.context_decode_batches,
                                 settings.context_decode_repeats)


def context_memory(lm, settings, named: dict, values: list) -> int:
    return 2 * min(context.sweep_prefill_lengths(lm, settings, values[0])[-1],
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


def roofline_tokens(lm) -> int:
    """'Measure this machine': fixed by its constants (and, on a GPU, the captured race)."""
    prompt = len(prompt_ids(lm.tokenizer, ROOFLINE_PROMPT))
    work = (greedy_tokens(prompt, ROOFLINE_NEW_TOKENS) + 3 * PREFILL_TOKENS
            + step_profile_tokens(prompt))
    if lm.device.type == "cuda":
        warm, new = captured_race.WARM_UP_TOKENS, step_bound.RACE_TOKENS
        work += 2 * greedy_tokens(prompt, warm) + 3 * greedy_tokens(prompt, new)
    return work


def roofline(lm, settings, named: dict, values: list) -> int:
    return roofline_tokens(lm)


def presenter_screen_tokens(lm, settings: Settings, measure: str) -> int:
    """The tokens the presenter screen `measure` feeds (0: no model run), from the constants
    of `presenter_handlers`; the cost screen counts the batch sweep it may run."""
    p = presenter

    def prompt() -> int:
        return _prompt_tokens(lm, settings, p.PROMPT)

    def batch() -> int:
        return batch_sweep_tokens(prompt(), sweep_sizes(p.BATCH), p.BATCH_STEPS)

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
        "long_context": lambda: context_decode_tokens(p.LONG_CONTEXT, (1,),
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
