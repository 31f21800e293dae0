"""Predict, then measure, inside the lessons: each key measurement takes the
learner's guess and its final text sets the guess beside what this run measured, on the real
model; the question's unit and "why" are the presenter's."""
from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime
from types import SimpleNamespace

import pytest

from inference.config import Settings
from inference.experiments.noise import judge
from inference.experiments.quiet_reference import QuietFigure
from inference.experiments.shared_results import SharedResults
from lessons import (
    batching_handlers,
    context_handlers,
    kv_cache_handlers,
    prefill_handlers,
    quantization_handlers,
)
from lessons.common.predictions import guess_md, load_screens, question
from visualizations.noise_view import BUSY

SETTINGS = Settings()
KEYS = [prefill_handlers.GUESS_KEY, kv_cache_handlers.GUESS_KEY, batching_handlers.GUESS_KEY,
        quantization_handlers.GUESS_KEY, batching_handlers.COST_GUESS_KEY,
        context_handlers.GUESS_KEY]


def measured_in(text: str) -> float:
    return float(re.search(r"\*\*measured:\*\* ([\d.,]+)", text).group(1).replace(",", ""))


@pytest.mark.parametrize("key", KEYS)
def test_each_lesson_question_is_a_presenter_screen(key):
    screen = {s.measure: s for s in load_screens()}[key]
    assert question(key) == screen and screen.predict and screen.unit and screen.why
    md = guess_md(key, 2, 4)
    assert "**Your guess:** 2" in md and "too low" in md and screen.why in md
    assert "No guess typed" in guess_md(key, None, 4)
    assert "No guess typed" in guess_md(key, 0, 4)  # an empty box arrives as 0


def test_prefill_sweep_compares_the_guess_with_its_verdict(lm):
    shared = SharedResults()
    done = list(prefill_handlers.run_prefill_sweep(lm, SETTINGS, shared, [4, 16], 16, guess=3))[-1]
    _, ratio = prefill_handlers.verdict_point(shared.get(("prefill_sweep", (4, 16), 16)))
    assert "**Your guess:** 3 × faster" in done.progress
    assert measured_in(done.progress) == pytest.approx(ratio, rel=0.05)
    again = list(prefill_handlers.run_prefill_sweep(lm, SETTINGS, shared, [4, 16], 16,
                                                    guess=None))[-1]
    if BUSY.capitalize() in done.progress:  # judged busy (noise.py): measured again, no verdict
        assert "shared result" not in again.progress and "on a busy machine" in done.progress
        return
    assert "shared result" in again.progress and "No guess typed" in again.progress


def test_kv_race_compares_the_guess_on_its_last_step_only(lm, chat_ids):
    prompt = lm.tokenizer.decode(chat_ids[:20])
    frames = list(kv_cache_handlers.race_frames(lm, SETTINGS, prompt, 4, guess=2.5))
    assert all("Your guess" not in (f.summary or "") for f in frames[:-1])
    assert "**Your guess:** 2.5 × faster" in frames[-1].summary
    if frames[-1].noise.busy:  # set beside the number, no verdict drawn (noise.py)
        assert "on a busy machine: run again to compare" in frames[-1].summary
        return
    speedup = float(re.search(r"made it \*\*([\d.]+)× faster|\(([\d.]+)×\)",
                              frames[-1].summary).group(1) or 0)
    if speedup:  # the card rounds to 0.1; the sentence is the race's own speed-up
        assert measured_in(frames[-1].summary) == pytest.approx(speedup, abs=0.06)


def test_a_busy_kv_race_judges_the_guess_against_the_quiet_race(lm, chat_ids, tmp_path,
                                                                 monkeypatch):
    """On the real model: a race judged quiet keeps its figure; the same race judged busy sets
    the guess against that figure (its verdict, named quiet with its time), its own beside."""
    from inference.experiments import quiet_reference
    from lessons.common.predictions import measured_with_unit, verdict

    monkeypatch.setenv("LLM_LAB_QUIET_REFERENCE", str(tmp_path / "quiet-reference.json"))
    prompt = lm.tokenizer.decode(chat_ids[:20])
    quiet = replace(SETTINGS, noise_spread_limit=float("inf"))  # judged by the spread of 5 steps
    list(kv_cache_handlers.race_frames(lm, quiet, prompt, 6, guess=2.5))
    refs = list(quiet_reference.read().values())
    busy = replace(SETTINGS, noise_spread_limit=-1.0)
    last = list(kv_cache_handlers.race_frames(lm, busy, prompt, 6, guess=2.5))[-1]
    assert last.noise.busy and "**Your guess:** 2.5 × faster" in last.summary
    if not refs:  # the quiet race was impossible twice (noise.py): nothing kept to judge by
        assert "on a busy machine: run again to compare" in last.summary
        return
    ref, = refs
    assert (f"**this machine, quiet** (measured {ref.when()}): "  # 2.0 is shown as "2"
            f"{measured_with_unit(ref.value, '× faster', 'that run')}, "
            f"{verdict(2.5, ref.value)}") in last.summary
    assert "on a busy machine." in last.summary and "run again to compare" not in last.summary
    assert f"**Why:** {question('kv_race').why}" in last.summary


def test_batch_sweep_compares_the_guess_with_the_measured_gain(lm):
    frames = list(batching_handlers.sweep_frames(lm, SETTINGS, SharedResults(), max_batch=2,
                                                 steps=2, budget_mb=None, guess=1.8))
    done = frames[-1]
    one, big = done.sweep.points[0], done.sweep.points[-1]
    assert "**Your guess:** 1.8 × the tokens/s" in done.table
    assert measured_in(done.table) == pytest.approx(big.gain_over(one).estimate,  # paired
                                                    abs=0.06)
    assert all("Your guess" not in (f.table or "") for f in frames[:-1])


def test_cost_view_compares_the_guess_with_the_largest_batch(lm):
    done = list(batching_handlers.sweep_frames(lm, SETTINGS, SharedResults(), max_batch=2,
                                               steps=2, budget_mb=None))[-1]
    view = batching_handlers.cost_view(lm, SETTINGS, done.sweep, price_per_hour=1.0,
                                       prompt_tokens=100, output_tokens=100, guess=5)
    assert "**Your guess:** 5 $ per million tokens" in view.table
    shown = float(re.search(r"\| 2 \|(?: [^|]+ \|){2} \$([\d,.]+) \|", view.table)
                  .group(1).replace(",", ""))  # batch 2's $ / M output in the table
    # the guess line rounds to whole dollars above $10 (17 beside the table's $16.64)
    assert measured_in(view.table) == pytest.approx(shown, rel=0.01, abs=0.5)
    # the sweep's own reading decides the guess's verdict, however late the view is drawn
    busy_sweep = replace(done.sweep, noise=judge(others_cpu=0.6))
    busy = batching_handlers.cost_view(lm, SETTINGS, busy_sweep, price_per_hour=1.0,
                                       prompt_tokens=100, output_tokens=100, guess=5)
    assert "on a busy machine" in busy.table and "**Why:**" not in busy.table
    quiet = batching_handlers.cost_view(lm, SETTINGS, replace(done.sweep, noise=judge()),
                                        price_per_hour=1.0, prompt_tokens=100,
                                        output_tokens=100, guess=5)
    assert "**Why:**" in quiet.table


def test_quantization_compares_int8_with_fp32_once_both_ran():
    fp32 = SimpleNamespace(key="fp32", decode_tokens_per_s=10.0)
    int8 = SimpleNamespace(key="int8", decode_tokens_per_s=14.0)
    assert quantization_handlers.compared([fp32], 1.5) == ""
    md = quantization_handlers.compared([fp32, int8], 1.5)
    assert "**Your guess:** 1.5 × faster" in md and measured_in(md) == pytest.approx(1.4)
    ref = QuietFigure("quant_speed int8÷fp32", 1.6, "1.6×", "2025-11-02T09:12:00", "a machine")
    busy, raced = judge(others_cpu=0.9), SimpleNamespace(key="int8")
    judged = quantization_handlers.compared([fp32, int8], 1.5, busy, raced, ref)
    assert "quiet** (measured 2 Nov 09:12): 1.6 × faster, close" in judged
    other = quantization_handlers.compared([fp32, int8], 1.5, busy, SimpleNamespace(key="int4"),
                                           ref)  # int4's race is not the int8 question
    assert "quiet" not in other and "1.4 × on a busy machine: run again" in other


def test_a_ratio_at_or_below_one_is_never_called_faster():
    """A "× faster" unit over a measured ratio ≤ 1 (a busy machine, a GPU's tiny prompt): the
    ratio is named plainly, quiet or busy; above 1 the unit stands."""
    from lessons.common.predictions import comparison_md

    quiet_slow = comparison_md(2, 0.7, "× faster", "Because.")
    assert "0.7 × faster" not in quiet_slow and "not faster on this run" in quiet_slow
    assert "3.2 × faster" in comparison_md(2, 3.2, "× faster", "Because.")
    busy_slow = guess_md("prefill_race", 2, 0.7, noisy=True)
    assert question("prefill_race").unit.strip().endswith("faster")  # the case this test is about
    measured = busy_slow.split("**measured:**")[1]
    assert "faster" not in measured and "0.7" in measured and "Why" not in busy_slow


def test_a_busy_run_is_judged_against_this_machines_quiet_reference():
    """Busy, with this machine's quiet figure for the same quantity: its verdict and why, named
    quiet with its time, this run's number beside it; busy without one: no verdict; a quiet run
    is judged on its own figure, the reference unused."""
    ref = QuietFigure("kv_race 32 tokens after 24 float32", 2.9, "2.9×", "2025-11-02T09:12:00",
                      "a test machine")
    why = question("kv_race").why
    busy = guess_md("kv_race", 3, 1.2, noisy=True, reference=ref)
    assert "**Your guess:** 3 × faster · **this machine, quiet** (measured 2 Nov 09:12): 2.9 × " \
           "faster, close: well predicted. This run: 1.2 × on a busy machine." in busy
    assert f"**Why:** {why}" in busy
    assert "too low: the measurement is 2.9× your guess" in guess_md("kv_race", 1, 1.2, True, ref)
    now = datetime.now().replace(second=0)  # today: its time alone
    slow_ref = replace(ref, value=0.9, measured_at=now.isoformat(timespec="seconds"))
    slow = guess_md("kv_race", 2, 1.2, noisy=True, reference=slow_ref)
    assert f"(measured {now:%H:%M}): 0.9 × (not faster on that run)" in slow
    without = guess_md("kv_race", 3, 1.2, noisy=True)
    assert "1.2 × on a busy machine: run again to compare" in without
    assert "close" not in without and "quiet" not in without and why not in without
    quiet = guess_md("kv_race", 3, 1.2, reference=ref)
    assert quiet == guess_md("kv_race", 3, 1.2) and "too high" in quiet and "quiet" not in quiet


def test_the_presenters_batch_screen_shows_the_lessons_gain_and_its_quiet_reference(
        lm, tmp_path, monkeypatch):
    """On the real model, Present's batching screen: the lesson's paired gain (not a ratio of
    two separately timed speeds), and on a busy run this machine's quiet figure for the same
    sweep beside it, as the KV race and prefill screens carry theirs."""
    from inference.experiments import quiet_reference
    from lessons import presenter_handlers as ph

    monkeypatch.setenv("LLM_LAB_QUIET_REFERENCE", str(tmp_path / "quiet-reference.json"))
    monkeypatch.setattr(ph, "BATCH", 2)  # batches 1 and 2, two timed steps each: quick
    monkeypatch.setattr(ph, "BATCH_STEPS", 2)
    sweeps = []
    real = ph.batch_sweep_steps

    def recorded(*args):
        update, judged = yield from real(*args)
        sweeps.append(update)
        return update, judged
    monkeypatch.setattr(ph, "batch_sweep_steps", recorded)

    quiet, shared = replace(SETTINGS, noise_spread_limit=float("inf")), SharedResults()
    first = list(ph.measure_steps("batch", lm, quiet, shared))[-1]  # bandwidth measured once
    refs = list(quiet_reference.read().values())
    real_reading = ph.noise.reading  # the sweep's reading has no step spread to judge by:
    monkeypatch.setattr(ph.noise, "reading", lambda *a, **k: replace(  # judged busy here
        real_reading(*a, **k), busy=True, reasons=("other programs used the CPU",)))
    last = list(ph.measure_steps("batch", lm, quiet, shared))[-1]
    for m, update in zip((first, last), sweeps):
        if m.shown != "—":  # not withheld as impossible
            one, big = update.points[0], update.points[-1]
            assert m.value == pytest.approx(big.gain_over(one).estimate)
    if not refs:  # the quiet sweep was impossible twice: nothing kept to judge by
        assert last.reference is None
        return
    ref, = refs
    assert last.noisy and last.reference is not None and last.reference.value == ref.value
