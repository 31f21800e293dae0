"""The presenter's handlers. One live measurement per screen (`MEASURES`, keyed by `measure:`):
a small run of the lessons' own engine functions, a `Step` between its parts (each one job on the
compute thread), then one `Measured` headline (`presenter_lines.py`: what a screen shows). What the
presenter keeps for a visitor, and the recap, are in `presenter_record.py`.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import asdict

from inference.config import LIMITS, Settings
from inference.experiments import context_sweep, context_theory, noise, quiet_reference
from inference.experiments import roofline as roofs
from inference.experiments.batch_sweep import SweepUpdate, batch_sweep_tokens, run_sweep
from inference.experiments.kv_race import RECOMPUTE, checked_race, race_tokens, summarize
from inference.experiments.noise import Noise
from inference.experiments.prefill_sweep import DECODE_STEPS, prefill_sweep, prefill_sweep_tokens
from inference.experiments.roofline import greedy_steps, greedy_tokens, machine_bandwidth
from inference.experiments.serving_cost import model_serving_costs
from inference.experiments.speculative_race import race_updates, spec_prompt, spec_race_tokens
from inference.generation import stream
from inference.quantize import build_steps
from inference.speculative import make_draft
from inference.tokens import encode_text, prompt_ids, tokenize
from visualizations.cards import human_bytes
from visualizations.noise_view import BUSY, supports_verdict

from .batching_handlers import budget_bytes
from .common.latest import PRESENTER_BATCH, keep, reuse, shared_key
from .common.measurement import prompt_tokens
from .common.predictions import Screen
from .common.prompt_input import encode_prompt
from .kv_cache_handlers import race_repeats
from .prefill_handlers import measure_text, sweep_reference
from .presenter_lines import (
    Measured,
    Step,
    build_step,
    busy_label,
    cache_running,
    first_and_next,
    first_next,
    ratio_label,
    spec_running,
    withheld,
)
from .presenter_record import screen_index, sweep_figures, visitor_sweep

QUESTION = "Name three colours of the rainbow."
PROMPT = LIMITS.default_prompt
SENTENCE = "Tokenization turns your sentence into pieces the model can count."
MIX = {"English": "The weather is lovely today, so we are walking to the park.",
       "French": "Il fait très beau aujourd'hui, alors nous marchons jusqu'au parc.",
       "Python": "if temp_c > 21.5: walk(to='park', with_dog=True)"}
RACE_TOKENS = 32  # the KV race's length
PREFILL_TOKENS = 128  # the prefill race's length
BATCH = 16  # the batching screen's largest batch
BATCH_STEPS = 4  # timed decode steps per batch size
DECODE_TOKENS = 16
INT8_TOKENS = 16
LONG_CONTEXT = (100, 4_000)  # the long-context screen's two cache lengths (its question's)
SPEC_TOKENS = 24  # the speculative race's length (prompt lookup on the edit prompt)
SPEC_K = 4  # guesses per pass: the number the screen's question names
BATCH_SCREEN = "Serving many people at once"  # the batching screen's title (assets/presenter.md)
RECAP = "recap"  # gathers the visitor's own results: no model run


def streamed(lm, settings: Settings, text: str, counted: str, running) -> Iterator[Step]:
    """`DECODE_TOKENS` greedy tokens answering `text`, a `Step` after each; returns events."""
    events = []
    for e in stream(lm, encode_prompt(lm, settings, text), max_new_tokens=DECODE_TOKENS):
        events.append(e)
        yield Step(counted, len(events), DECODE_TOKENS, running(events))
    return events


def answer(lm, settings: Settings, shared) -> Iterator[Measured | Step]:
    events = yield from streamed(lm, settings, QUESTION, "token", first_and_next)
    judged = noise.reading([e.seconds for e in events[1:]], settings)
    later = sum(e.seconds for e in events[1:])  # decode: the first token's prefill apart
    rate = (len(events) - 1) / later if later else 0.0
    yield Measured("answer", rate, f"{rate:.1f}",
                   busy_label("tokens per second after the first", judged),
                   f"“{QUESTION}” → “{events[-1].text.strip()}” (first token "
                   f"{events[0].seconds * 1000:.0f} ms, then {len(events) - 1} tokens in "
                   f"{later:.2f} s)", judged.busy, first_next(events))


def tokens(lm, settings: Settings, shared) -> Iterator[Measured]:
    t = tokenize(lm.tokenizer, SENTENCE)
    pieces = " · ".join(tok.text or "▯" for tok in t.tokens)
    yield Measured("tokens", len(t.tokens), f"{len(t.tokens)}", f"tokens for {t.words} words",
                   f"{pieces}  ({len(SENTENCE)} characters)")


def token_mix(lm, settings: Settings, shared) -> Iterator[Measured]:
    counts = {name: len(encode_text(lm.tokenizer, text)) for name, text in MIX.items()}
    words = {name: len(text.split()) for name, text in MIX.items()}
    ratio = max(c / words[n] for n, c in counts.items()) / (counts["English"] / words["English"])
    yield Measured("token_mix", ratio, f"{ratio:.1f}×", "more tokens per word, worst vs English",
                   " · ".join(f"{n}: {c} tokens / {words[n]} words" for n, c in counts.items()))


def prefill(lm, settings: Settings, shared) -> Iterator[Measured | Step]:
    yield Step("one pass", 0, 1, f"reading {prompt_tokens(lm, settings, PROMPT)} prompt tokens, "
               f"then {DECODE_STEPS} next tokens one at a time")
    m = measure_text(lm, settings, PROMPT)  # `.noise`: the decode steps' reading
    ms = m.ttft_seconds * 1000
    step = (f", then {m.decode_step_seconds * 1000:.0f} ms per next token"
            if m.decode_step_seconds else "")
    yield Measured("prefill", ms, f"{ms:.0f} ms", busy_label("to the first token", m.noise),
                   f"{m.prompt_tokens} prompt tokens read in one pass of "
                   f"{m.prefill_seconds * 1000:.0f} ms{step}", m.noise.busy,
                   {"first_ms": ms, "next_ms": (m.decode_step_seconds or 0.0) * 1000})


def prefill_race(lm, settings: Settings, shared) -> Iterator[Measured | Step]:
    """Lesson 2's race at one length: a `Step` after each stretch fed one token at a time."""
    for last in prefill_sweep(lm, [PREFILL_TOKENS], PREFILL_TOKENS):
        p = last.points[-1] if last.points else None
        one, fed, so_far = ((last.one_pass_seconds, last.fed_seconds, " so far") if last.feeding
                            else (p.parallel_seconds, p.sequential_seconds, ""))
        yield Step("token", last.feeding or p.tokens, PREFILL_TOKENS, f"one pass {one * 1000:.0f} "
                   f"ms · one token at a time {fed * 1000:.0f} ms{so_far} (measured)")
    judged = noise.reading(settings=settings)
    p = last.points[-1]
    ratio = p.speedup  # the rounds' robust estimate (one pass at its low quantile)
    if p.impossible:
        yield withheld("prefill_race", p.impossible, f"{p.tokens} tokens")
        return
    yield Measured("prefill_race", ratio, f"{ratio:.1f}×",
                   ratio_label(ratio, "faster in one pass", "one token at a time ÷ one pass",
                               f"{p.tokens} tokens", judged),
                   f"one pass {p.parallel_seconds * 1000:.0f} ms · one token at a time "
                   f"{p.sequential_seconds * 1000:.0f} ms", judged.busy,
                   reference=sweep_reference(last.points, lm.info.dtype, judged))


def decode(lm, settings: Settings, shared) -> Iterator[Measured | Step]:
    events = yield from streamed(lm, settings, PROMPT, "decode step", first_and_next)
    judged = noise.reading([e.seconds for e in events[1:]], settings)
    steps = [e.seconds for e in events[1:]] or [events[0].seconds]
    median = statistics.median(steps)
    yield Measured("decode", 1 / median, f"{1 / median:.1f}",
                   busy_label("tokens per second, one by one", judged),
                   f"median step {median * 1000:.0f} ms over {len(steps)} steps · first token "
                   f"{events[0].seconds * 1000:.0f} ms (the prefill)", judged.busy,
                   first_next(events))


def roofline(lm, settings: Settings, shared) -> Iterator[Measured | Step]:
    """The read bandwidth and the batch-1 decode speed under it, a `Step` per decode step."""
    for p in roofs.roofline_steps(lm, DECODE_TOKENS, shared):
        if p.roofline is None:
            speed = (f" · {p.tokens_per_s:.1f} tokens/s so far (median step)"
                     if p.tokens_per_s else "")
            yield Step("decode step", p.steps, p.total,
                       f"read bandwidth {p.bandwidth_gbs:.1f} GB/s (measured){speed}")
    judged = noise.reading(settings=settings)
    r = p.roofline
    yield Measured("roofline", r.bandwidth_gbs, f"{r.bandwidth_gbs:.1f} GB/s",
                    busy_label("memory read speed", judged),
                    f"ceiling {r.ceiling_tokens_per_s:.1f} tokens/s for "
                    f"{human_bytes(r.bytes_per_token)} per step · measured "
                    f"{r.measured_tokens_per_s:.1f} tokens/s ({r.fraction:.0%} of the ceiling)",
                    judged.busy)


def speculative(lm, settings: Settings, shared) -> Iterator[Measured | Step]:
    """Lesson 3b's race, short: prompt lookup on the edit prompt, tokens per pass."""
    ids = encode_prompt(lm, settings, spec_prompt())
    for u in race_updates(lm, ids, make_draft(lm, "prompt_lookup"), SPEC_K, SPEC_TOKENS, shared):
        if u.summary is None:
            yield Step("token", u.passes[-1].tokens_so_far, SPEC_TOKENS,
                       spec_running(u.passes))
    s = u.summary
    judged = noise.reading(s.plain_step_seconds, settings)
    same = "same tokens" if s.identical else "tokens differ"
    verdict = s.verdict if supports_verdict(judged) else "no verdict from a busy machine"
    # a count of tokens, which a busy machine does not change: only the speeds carry the notice
    yield Measured("speculative", s.tokens_per_pass, f"{s.tokens_per_pass:.2f}",
                    busy_label(f"tokens per pass (plain decoding: 1; k = {SPEC_K})", judged),
                    f"{s.new_tokens} tokens in {s.passes} verification passes after the "
                    f"prefill · {s.accepted} of {s.proposed} guesses kept · speculative "
                    f"{s.tokens_per_s:.1f} tokens/s against plain {s.plain_tokens_per_s:.1f} "
                    f"({s.speedup:.2f}×, {verdict}) · {same}")


def step_split(lm, settings: Settings, shared) -> Iterator[Measured | Step]:
    yield Step("decode step profiled", 0, 1, "every operation of one real decode step timed")
    bound = roofs.measure_step_bound(lm, encode_prompt(lm, settings, PROMPT),
                                                race_tokens=0)
    judged = noise.reading(settings=settings)
    p, share = bound.profile, 100 * bound.profile.matmul_share
    if not noise.split_holds(judged, [p.matmul_seconds, p.other_ops_seconds], p.step_seconds):
        why = "; ".join(judged.reasons) or ("a part came out at about 0 ms, or the parts at "
                                            "more than the step")
        yield Measured("step_split", share, "—", "the split of a decode step was not "
                        "reliable on this run: " + (BUSY if judged.busy else "run again"),
                       f"one step {p.step_seconds * 1000:.1f} ms (measured) · {why}", True)
        return
    yield Measured("step_split", share, f"{share:.0f}%",
                    "of a decode step is the matrix products",
                    f"one step {p.step_seconds * 1000:.1f} ms: matrix products "
                    f"{p.matmul_seconds * 1000:.1f} ms ({p.matmul_ops_per_step:.0f} of them) · "
                    f"{p.ops_per_step - p.matmul_ops_per_step:,.0f} other operations "
                    f"{p.other_ops_seconds * 1000:.1f} ms · between them "
                    f"{p.between_ops_seconds * 1000:.1f} ms · dispatch alone ≈ "
                    f"{bound.dispatch_seconds * 1000:.1f} ms")


def kv_bytes(lm, settings: Settings, shared) -> Iterator[Measured | Step]:
    events = yield from streamed(lm, settings, PROMPT, "token", cache_running)
    first, last = events[0], events[-1]
    per_token = (last.cache_bytes - first.cache_bytes) / max(last.cache_tokens
                                                            - first.cache_tokens, 1)
    i = lm.info
    yield Measured("kv_bytes", per_token, human_bytes(per_token), "of cache per token",
                   f"cache {human_bytes(first.cache_bytes)} after the prompt "
                   f"({first.cache_tokens} tokens) → {human_bytes(last.cache_bytes)} "
                   f"({last.cache_tokens}) · formula 2 × {i.layers} layers × {i.kv_heads} KV "
                   f"heads × {i.head_dim} × {lm.bytes_per_value} bytes")


def kv_race(lm, settings: Settings, shared) -> Iterator[Measured | Step]:
    """Lesson 4's race, short: a `Step` after each timed step."""
    ids = encode_prompt(lm, settings, PROMPT, max_tokens=settings.race_max_prompt_tokens)
    steps = []
    for step in checked_race(lm, ids, RACE_TOKENS):  # raced again if impossible; a step a part
        if step.attempt and step.index == 0 and step.lane != RECOMPUTE:
            steps = []  # the second race replaces the first
        steps.append(step)
        cached = sum(t.seconds for t in steps if t.lane != RECOMPUTE)
        again = sum(t.seconds for t in steps if t.lane == RECOMPUTE)
        yield Step("race step", len(steps), 2 * RACE_TOKENS, f"with the cache {cached:.2f} s · "
                   f"recomputing everything {again:.2f} s so far (measured)")
    judged = noise.reading(race_repeats(steps), settings)
    s = summarize(steps, len(ids))
    if s.impossible:
        yield withheld("kv_race", s.impossible, f"{s.new_tokens} tokens")
        return
    same = "same tokens" if s.same_tokens else "tokens differ"
    label = ratio_label(s.speedup, "faster with the cache", "recomputing ÷ cached time",
                        f"{s.new_tokens} tokens", judged)
    yield Measured("kv_race", s.speedup, f"{s.speedup:.1f}×", label,
                    f"cached {s.cached_seconds:.2f} s · recomputed "
                    f"{s.recompute_seconds:.2f} s · {s.work_ratio:.0f}× the tokens through the "
                    f"model without it · {same}", judged.busy,
                    reference=quiet_reference.for_race(s, lm.info.dtype, judged))


def long_context(lm, settings: Settings, shared) -> Iterator[Measured | Step]:
    """One decode step with 100 and with 4,000 real cached tokens (batch 1), lesson 4c's sweep."""
    short, long = LONG_CONTEXT
    repeats = max(1, settings.context_decode_repeats)
    yield Step("cache length", 0, len(LONG_CONTEXT), f"one prefill fills a cache of {long:,} "
               "tokens (not timed), then a decode step is timed at each length")
    for last in context_sweep.decode_lengths_sweep(lm, LONG_CONTEXT, batches=(1,),
                                                   repeats=repeats):
        steps = " · ".join(f"{p.cache_tokens:,} cached tokens: {p.seconds * 1000:.1f} ms a step"
                           for p in last.points)
        runs = f"median of {repeats} runs" if repeats > 1 else "one run"
        yield Step("cache length", last.done, last.total, f"{steps} (measured, {runs})")
    judged = noise.reading(settings=settings)
    c = context_sweep.compare_lengths(last.points, short, long)
    floor = context_theory.decode_theory(lm, shared)
    predicted = floor.seconds(long) / floor.seconds(short)
    apart = ("no verdict from a busy machine" if not supports_verdict(judged) else
             "beyond this run's noise" if c.beyond_noise
             else "their ranges overlap: within this run's noise")
    yield Measured("long_context", c.ratio, f"{c.ratio:.2f}×",
                    busy_label(f"as long with {c.long.cache_tokens:,} cached tokens as with "
                               f"{c.short.cache_tokens:,}", judged),
                    f"one step {c.long.seconds * 1000:.1f} ms against "
                    f"{c.short.seconds * 1000:.1f} ms ({apart}) · the bandwidth floor "
                    f"predicts {predicted:.2f}× (theoretical: weights "
                    f"{human_bytes(floor.weight_bytes)} + L × "
                    f"{human_bytes(floor.kv_bytes_per_token)} per token, "
                    f"{floor.bandwidth_gbs:.1f} GB/s measured)", judged.busy)


def batch_sweep_steps(lm, settings: Settings, shared
                      ) -> Generator[Step, None, tuple[SweepUpdate, Noise]]:
    """Decode 1, 2, 4, 8 and 16 copies of a prompt, kept in `shared` for the cost screen."""
    ids = encode_prompt(lm, settings, PROMPT)
    for last in run_sweep(lm, ids, BATCH, BATCH_STEPS, budget_bytes(lm, settings, None),
                          bandwidth_gbs=machine_bandwidth(shared, lm.device)):
        # the sizes run are those that fit (a larger batch never needs less memory)
        newest = last.points[-1] if last.points else None  # else "Batch 1: prefilling 1 × 20…"
        yield Step("batch size", len(last.points), sum(p.fits for p in last.plans),
                   f"batch {newest.batch}: {newest.tokens_per_s:.1f} tokens/s (measured) · "
                   f"{last.message}" if newest else last.message)
    judged = noise.reading(settings=settings)
    keep(shared, shared_key(lm, PRESENTER_BATCH), last.points, judged)
    return last, judged


def batch(lm, settings: Settings, shared) -> Iterator[Measured | Step]:
    """Lesson 5's gain at the largest batch (the lesson's paired estimate)."""
    update, judged = yield from batch_sweep_steps(lm, settings, shared)
    points = update.points
    one, big = points[0], points[-1]
    if big.impossible:  # measured again by the sweep, still impossible
        yield withheld("batch", big.impossible, f"batch {big.batch}")
        return
    ratio = big.gain_over(one).estimate
    yield Measured("batch", ratio, f"{ratio:.1f}×",
                   busy_label(f"the tokens/s at batch {big.batch}", judged),
                   f"batch 1: {one.tokens_per_s:.1f} tokens/s ({one.step_seconds * 1000:.0f} "
                   f"ms a step) · batch {big.batch}: {big.tokens_per_s:.1f} tokens/s "
                   f"({big.step_seconds * 1000:.0f} ms a step)", judged.busy,
                   sweep_figures(points),  # the cost screen prices them
                   reference=quiet_reference.for_sweep(update, lm.info.dtype, judged))


def int8(lm, settings: Settings, shared) -> Iterator[Measured | Step]:
    """Build float32 and int8 and decode the same greedy tokens with each."""
    ids = encode_prompt(lm, settings, PROMPT)
    runs, per_weight = {}, {}
    for key, name in (("fp32", "float32"), ("int8", "int8")):
        for progress in build_steps(lm, key, shared):
            yield build_step(name, progress, lm.info.layers)
        per_weight[f"{key}_bytes_per_weight"] = progress.built.weight_bytes / lm.info.parameters
        beside = (f" · float32 {runs['fp32'].decode_tokens_per_s:.1f} tokens/s" if runs else "")
        for run in greedy_steps(progress.built.model, ids, INT8_TOKENS, lm.device):
            now = (f"{run.decode_tokens_per_s:.1f} tokens/s so far (measured)" if run.step_seconds
                   else f"prefill {run.prefill_seconds * 1000:.0f} ms, the first token (measured)")
            yield Step(f"{name} decode: token", len(run.token_ids), INT8_TOKENS, now + beside)
        runs[key] = run
    judged = noise.reading(settings=settings)
    fp32, q8 = runs["fp32"], runs["int8"]
    ratio = q8.decode_tokens_per_s / fp32.decode_tokens_per_s
    same = sum(a == b for a, b in zip(fp32.token_ids, q8.token_ids)) / len(fp32.token_ids)
    yield Measured("int8", ratio, f"{ratio:.2f}×",
                    busy_label("the decode speed of float32", judged),
                    f"float32 {fp32.decode_tokens_per_s:.1f} tokens/s · int8 "
                    f"{q8.decode_tokens_per_s:.1f} tokens/s · {same:.0%} of the {INT8_TOKENS} "
                    "greedy tokens the same", judged.busy, per_weight)


def cost(lm, settings: Settings, shared, results: dict | None = None
         ) -> Iterator[Measured | Step]:
    """$ per million output tokens at the largest batch, priced from this visitor's own batch
    sweep (in `results`), else a quiet one kept on this machine, else one measured now."""
    own = visitor_sweep((results or {}).get("batch"))
    if own is not None:
        points, busy, when = own
        source = f"your batch sweep on “{BATCH_SCREEN}” ({when})"
    elif (kept := reuse(shared, shared_key(lm, PRESENTER_BATCH))) is not None:
        (points, judged), busy = kept, False
        source = f"a quiet batch sweep kept on this machine (run “{BATCH_SCREEN}” for yours)"
    else:
        update, judged = yield from batch_sweep_steps(lm, settings, shared)
        points, busy = update.points, judged.busy
        source = f"a batch sweep measured now (run “{BATCH_SCREEN}” for yours)"
    price = settings.price_per_hour.default
    costs = model_serving_costs(lm, points, price, settings.conversation_prompt_tokens.default,
                                settings.conversation_output_tokens.default,
                                machine_bandwidth(shared, lm.device))
    one, big = costs[0], costs[-1]
    label = f"per million output tokens at batch {big.batch}"
    yield Measured("cost", big.usd_per_million_output, f"${big.usd_per_million_output:,.2f}",
                   f"{label} · {BUSY}" if busy else label,
                   f"from {source}: {one.measured_output_tokens_per_s:.1f} and "
                   f"{big.measured_output_tokens_per_s:.1f} tokens/s at batch 1 and "
                   f"{big.batch} (measured) · at ${price:.2f} an hour, "
                   f"${one.usd_per_million_output:,.2f} per million alone · carried to a "
                   f"{big.context_tokens:,.0f}-token context (estimate), as in lesson 5", busy,
                   # what it priced: a newer sweep of this visitor's can withdraw it
                   {"batch": big.batch, "tokens_per_s": big.measured_output_tokens_per_s})


MEASURES: dict[str, Callable[..., Iterator[Measured | Step | None]]] = {
    f.__name__: f for f in (answer, tokens, token_mix, prefill, prefill_race, decode, roofline,
                            speculative, step_split, kv_bytes, kv_race, long_context, batch,
                            int8, cost)}


def measure_steps(key: str, lm, settings: Settings, shared, results: dict | None = None
                  ) -> Iterator[Measured | Step | None]:
    """Screen `key`'s measurement; `results`: the visitor's so far (the cost screen's)."""
    yield from (cost(lm, settings, shared, results) if key == "cost"
                else MEASURES[key](lm, settings, shared))


def measure_screen_steps(p: dict, screens: tuple[Screen, ...], typed: float | None, lm,
                         settings: Settings, shared) -> Iterator[dict | Step | None]:
    """The measurement's None or `Step`s, then the progress with its result and the typed
    guess (the recap gathers the results: no model run)."""
    s = screens[screen_index(screens, p)]
    if s.predict is not None and typed is not None:
        p["guesses"][s.measure] = float(typed)
    if s.measure == RECAP:  # the recap slide draws the visitor's own results (recap_figures)
        n = sum(k in p["results"] for k in MEASURES)
        p["results"][RECAP] = asdict(Measured(RECAP, n, f"{n} of {len(MEASURES)}",
                                              "figures measured on this machine",
                                              f"gathered at {time.strftime('%H:%M')}"))
    else:
        # at once, before any model work: the screen shows its own line, not a grey veil
        yield Step(f"{s.button}: started", 0, 0, "each step's figure shows here as it is measured")
        for m in measure_steps(s.measure, lm, settings, shared, p["results"]):
            if m is None or isinstance(m, Step):
                yield m
            else:
                p["results"][s.measure] = asdict(m)
    yield p


def screen_tokens(lm, settings: Settings, measure: str) -> int:
    """The tokens screen `measure`'s button feeds (0: no model run), by the experiments' own
    work formulas, so the work budget refuses it before it runs."""
    prompt = prompt_tokens(lm, settings, PROMPT)
    batch_tokens = batch_sweep_tokens(prompt, BATCH, BATCH_STEPS)
    work = {
        "answer": lambda: greedy_tokens(prompt_tokens(lm, settings, QUESTION), DECODE_TOKENS),
        "prefill": lambda: greedy_tokens(prompt, DECODE_STEPS + 1),
        "prefill_race": lambda: prefill_sweep_tokens([PREFILL_TOKENS], PREFILL_TOKENS),
        "decode": lambda: greedy_tokens(prompt, DECODE_TOKENS),
        "roofline": lambda: greedy_tokens(
            len(prompt_ids(lm.tokenizer, roofs.ROOFLINE_PROMPT)), DECODE_TOKENS),
        "speculative": lambda: spec_race_tokens(prompt_tokens(lm, settings, spec_prompt()),
                                                SPEC_TOKENS, SPEC_K, model_draft=False),
        "step_split": lambda: roofs.step_profile_tokens(prompt),
        "kv_bytes": lambda: greedy_tokens(prompt, DECODE_TOKENS),
        "kv_race": lambda: race_tokens(prompt_tokens(lm, settings, PROMPT,
                                                     settings.race_max_prompt_tokens),
                                       RACE_TOKENS),
        "long_context": lambda: context_sweep.decode_lengths_tokens(
            LONG_CONTEXT, (1,), settings.context_decode_repeats),
        "batch": lambda: batch_tokens,
        "int8": lambda: 2 * greedy_tokens(prompt, INT8_TOKENS),
        "cost": lambda: batch_tokens,
    }
    return work[measure]() if measure in work else 0  # tokenizer-only screens, the recap
