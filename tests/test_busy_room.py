"""Numbers that hold up in a busy room: every lesson measurement, run while other
processes burn this machine's cores, ends on the busy notice, draws none of the verdicts its own
verdict functions draw on a quiet machine, and is recognised as busy by the shared-run rule (so
no later visitor is shown it); the presenter's timed screens the same. The quiet side never
needs a quiet machine: `test_busy_verdicts.py` holds each verdict function to hand-made
readings.

The busy side holds whatever else the machine is doing (other work only makes it busier). Each
handler runs with its smallest settings (a second or two on a quiet 2-core CPU).
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import psutil
import pytest

from inference.config import Range, Settings
from inference.experiments import noise
from inference.experiments.shared_results import SharedResults
from lessons import (
    batching_handlers,
    context_handlers,
    kv_cache_handlers,
    machine_handlers,
    prefill_handlers,
    presenter_handlers,
    presenter_record,
    quantization_handlers,
    speculative_handlers,
    start_handlers,
)
from lessons.common.measurement import Outcome
from lessons.common.predictions import load_screens
from polling import wait_for
from visualizations import (
    timing_text,
)
from visualizations.noise_view import BUSY
from visualizations.quant_charts import closing_note_md

SETTINGS = Settings()
SPIN = "import time\nend = time.time() + 900\nwhile time.time() < end: pass"
GUESS_WHY = "**Why:**"  # comparison_md's line beside a guess: only from a quiet run
GUESSED = ("too low:", "too high:", "close: well predicted")  # its verdict on the guess


@contextlib.contextmanager
def measuring(device):
    """A block run as one measurement, watched as the measurement wrapper watches a run."""
    outcome = Outcome()
    with noise.watching(noise.Watching(device, noise.begin(device), outcome.readings)):
        yield outcome


@pytest.fixture(autouse=True)
def no_quiet_reference(tmp_path, monkeypatch):
    """No quiet reference on file: a busy run has nothing to judge a guess by (judged against
    one, named quiet, in test_guesses.py)."""
    monkeypatch.setenv("LLM_LAB_QUIET_REFERENCE", str(tmp_path / "quiet-reference.json"))


@pytest.fixture
def busy_room():
    """One spinning process per core but one (at least one), each burning a core until the
    test ends; waits until they have really run."""
    if noise.cpu_reading().machine_busy_s is None:
        pytest.skip("no /proc/stat here: the other-programs CPU signal is Linux only")
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN])
                for _ in range(max(1, (os.cpu_count() or 1) - 1))]
    try:
        assert wait_for(lambda: all(psutil.Process(p.pid).cpu_times().user > 0.05
                                    for p in spinners), timeout=60)
        yield
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def preset(lm) -> SharedResults:
    """Shared results with this machine's one bandwidth and compute-roof figures preset (each
    is measured once per machine; presetting them keeps the runs short)."""
    shared = SharedResults()
    shared.put(("read-bandwidth", str(lm.device)), 12.5)
    shared.put(("matmul-gflops", str(lm.device), str(lm.dtype)), 150.0)
    return shared


SPEC_PROMPT = "Repeat this line: one two three four five. one two three four five."


# ---- each lesson measurement, busy: (the last frame's texts, the verdicts it must not draw) ----

SMALL_CONTEXT = replace(SETTINGS, context_prefill_lengths=(16, 32, 64),
                        context_decode_lengths=(0, 16), context_decode_batches=(1,),
                        context_decode_repeats=2, context_guess_lengths=(0, 16))


def prefill_it(lm, monkeypatch):
    m = prefill_handlers.measure_text(lm, SETTINGS, "Hi there")
    assert m.noise is not None and m.noise.busy, m.noise
    return [timing_text.prefill_report_md(m)], []


def prefill_sweep(lm, monkeypatch):
    last = list(prefill_handlers.run_prefill_sweep(lm, SETTINGS, preset(lm), [4, 8], 8, 3))[-1]
    return [last.progress, last.chart.layout.title.text], [GUESS_WHY, *GUESSED]


def context_prefill(lm, monkeypatch):
    last = list(context_handlers.prefill_frames(lm, SMALL_CONTEXT, SharedResults(), 64))[-1]
    return [last.text, last.progress, last.chart.layout.title.text], []


def context_decode(lm, monkeypatch):
    last = list(context_handlers.decode_frames(lm, SMALL_CONTEXT, preset(lm), 16,
                                               guess=2))[-1]
    return [last.text, last.progress, last.chart.layout.title.text], [GUESS_WHY, *GUESSED]


def context_memory(lm, monkeypatch):
    frames = list(context_handlers.memory_frames(lm, SMALL_CONTEXT, SharedResults(), 32))
    last = frames[-1]
    sampled = any("sampled every millisecond" in f.text for f in frames)
    # other programs' CPU does not move this process's peak memory: only a sampled peak, which
    # a busy CPU can miss, draws no verdict (kv_text.memory_verdict)
    return [last.text], (["more** at its peak", "within 10% of each other"] if sampled else [])


def spec_race(lm, monkeypatch):
    last = list(speculative_handlers.run_spec_race(lm, SETTINGS, preset(lm),
                                              SPEC_PROMPT, "prompt_lookup", 2, 6))[-1]
    return [last.cards_md, last.progress], []


def spec_sweep(lm, monkeypatch):
    monkeypatch.setattr(speculative_handlers, "DRAFTS", speculative_handlers.DRAFTS[:1])
    small = replace(SETTINGS, spec_k=Range(1, 2, 1))
    last = list(speculative_handlers.run_k_sweep(lm, small, preset(lm), SPEC_PROMPT, 4))[-1]
    hover = {str(d) for t in last.chart.data for d in (t.customdata or ())}
    assert not hover & {"faster", "slower", "within noise"}, hover  # no verdict on a point
    return [last.text, last.chart.layout.title.text], []


def spec_batch(lm, monkeypatch):
    small = replace(SETTINGS, spec_batches=(1, 2))
    last = list(speculative_handlers.run_batch(lm, small, preset(lm), SPEC_PROMPT, 2, 2.0))[-1]
    return [last.text, last.progress], []


def kv_race(lm, monkeypatch):
    last = list(kv_cache_handlers.race_frames(lm, SETTINGS, "Hi there", 4, guess=2.5))[-1]
    return [last.summary, last.progress], [GUESS_WHY, *GUESSED]


def kv_race_lengths(lm, monkeypatch):
    monkeypatch.setattr(kv_cache_handlers, "LENGTHS", (8, 32))
    real = kv_cache_handlers.step_costs
    monkeypatch.setattr(kv_cache_handlers, "step_costs",
                        lambda lm_, ids: real(lm_, ids, lengths=(8, 32), repeats=1))
    last = list(kv_cache_handlers.race_lengths_frames(lm, SharedResults()))[-1]
    return [last.text, last.progress], []


def kv_prefix(lm, monkeypatch):
    last = list(kv_cache_handlers.prefix_frames(lm, SETTINGS, "You are terse.", "When?", 2))[-1]
    return [last.text], []


def kv_growth(lm, monkeypatch):
    last = list(kv_cache_handlers.growth_frames(lm, SETTINGS, "Hi there", 3))[-1]
    return [last.text, last.formula], []


def batch_sweep(lm, monkeypatch):
    last = list(batching_handlers.sweep_frames(lm, SETTINGS, preset(lm), max_batch=2,
                                               steps=2, budget_mb=None, guess=1.8))[-1]
    return ([last.closing, last.table, last.progress, last.throughput.layout.title.text],
            [GUESS_WHY, *GUESSED])


def batch_schedules(lm, monkeypatch):
    small = replace(SETTINGS, trace_new_tokens=Range(2, 256, 3))
    last = list(batching_handlers.schedule_frames(
        lm, small, SharedResults(), workload=batching_handlers.RANDOM, seed=1, requests=2,
        rate_per_s=8.0, max_batch=2, fill_wait_s=0.0))[-1]
    return [last.progress, last.table, last.closing], []


def quantization(lm, monkeypatch):
    frames = list(quantization_handlers.compare_frames(lm, SETTINGS, preset(lm),
                                                       "Hi there", ["fp32", "int8"], 8))
    last = frames[-1]
    assert last.noise is not None and last.noise.busy, last.noise
    closing = (closing_note_md(lm.info, last.reports, last.bandwidth_gbs, None, last.noise)
               + quantization_handlers.compared(last.reports, 2.0, last.noise))  # as the panel
    return [closing, last.message], [GUESS_WHY, *GUESSED]


def this_machine(lm, monkeypatch):
    *_, view = machine_handlers.measure_machine_steps(lm, preset(lm))
    return [view.compute_md, view.step_md], []


def first_screen_race(lm, monkeypatch):
    small = replace(SETTINGS, live_race_new_tokens=4)
    last = list(start_handlers.live_race_frames(lm, small, "Hi there"))[-1]
    return [last.result], []


@dataclass(frozen=True)
class Case:
    run: Callable  # (lm, monkeypatch) -> (the last frame's texts, phrases only this run forbids)
    verdicts: tuple[str, ...]  # what the handler's verdict functions draw on a quiet machine


CASES = {
    "prefill_it": Case(prefill_it, ("cheaper by", "costs more by", "less than a decode step",
                                    "Why the first token")),
    "prefill_sweep": Case(prefill_sweep, ("One pass is faster by", "faster than feeding")),
    "context_prefill": Case(context_prefill, ("rose **", "fell to **", "stayed within 10%",
                                              "the L² term is **", "cannot separate an L²")),
    "context_decode": Case(context_decode, ("×** one with", "could not be told apart",
                                            "×** as long", "cannot tell them apart",
                                            "read faster than the bandwidth measurement")),
    "context_memory": Case(context_memory, ()),
    "spec_race": Case(spec_race, ("was **faster**", "was **slower**", "No difference beyond",
                                  "**above** the one-token ceiling",
                                  "below the one-token ceiling", "'>faster<", "'>slower<",
                                  "'>within noise<")),
    "spec_sweep": Case(spec_sweep, ("Best here", "No draft beat plain decoding")),
    "spec_batch": Case(spec_batch, ("by the roofline", "| memory,", "| compute,",
                                    "| neither,")),
    "kv_race": Case(kv_race, ("× faster**", "was **slower** this time")),
    "kv_race_lengths": Case(kv_race_lengths, ("undersells", "the gap grows to", "the gap is",
                                              "That is why")),
    "kv_prefix": Case(kv_prefix, ()),
    "kv_growth": Case(kv_growth, ()),
    "batch_sweep": Case(batch_sweep, ("**Why.**", "stopped paying between", "still paid",
                                      "Too close to call", "grows with batch size",
                                      "fell with batch size", "levelled off")),
    "batch_schedules": Case(batch_schedules, ()),
    "quantization": Case(quantization, ("Fastest decode here", "decoded slower than float32")),
    "this_machine": Case(this_machine, ("Bound by", "Neither roof bounds it", "| memory |",
                                        "| arithmetic |", "| neither roof |", "| dispatch |",
                                        "explainer's contrast", "rule of thumb")),
    "first_screen_race": Case(first_screen_race, ("the cache saved",
                                                  "smaller than the steps' own variation")),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_lesson_measurement_in_a_busy_room(lm, busy_room, monkeypatch, name):
    """The last frame shows the busy notice, the run's readings (what the shared-run rule reads)
    say busy, and it draws none of the handler's verdicts."""
    case = CASES[name]
    with measuring(lm.device) as outcome:  # as the measurement wrapper runs it
        texts, forbidden = case.run(lm, monkeypatch)
    shown = "\n".join(t for t in texts if t)
    assert BUSY.capitalize() in shown or BUSY in shown, shown[:600]
    assert outcome.busy  # never replayed to a later visitor
    for phrase in (*case.verdicts, *forbidden):
        assert phrase not in shown, (phrase, shown)


# ---- the presenter's timed screens, busy ----

PRESENTER_SMALL = {"DECODE_TOKENS": 4, "PREFILL_TOKENS": 16, "RACE_TOKENS": 4, "BATCH": 2,
                   "BATCH_STEPS": 2, "INT8_TOKENS": 4, "LONG_CONTEXT": (4, 32), "SPEC_TOKENS": 6}
PRESENTER = {  # screen key -> what its label or detail says only of a quiet run
    "answer": (), "prefill": (), "decode": (), "roofline": (),
    "prefill_race": ("faster", "not faster on this run"),
    "speculative": (", faster)", ", slower)", ", within noise)"),
    "step_split": ("of a decode step is the matrix products",),
    "kv_race": ("faster", "not faster on this run"),
    "long_context": ("beyond this run's noise", "within this run's noise"),
    "batch": (), "int8": (), "cost": (),
}
COUNTED = {"speculative"}  # its headline is a count of tokens: compared with the guess anyway


@pytest.mark.parametrize("key", list(PRESENTER))
def test_a_presenter_screen_in_a_busy_room(lm, busy_room, monkeypatch, key):
    for name, value in PRESENTER_SMALL.items():
        monkeypatch.setattr(presenter_handlers, name, value)
    with measuring(lm.device) as outcome:
        *_, m = presenter_handlers.measure_steps(key, lm, SETTINGS, preset(lm))
    assert BUSY in m.label, m
    screens = load_screens(lm.info)
    screen = next(s for s in screens if s.measure == key)
    progress = {"screen": screens.index(screen), "guesses": {key: 2.0},
                "results": {key: asdict(m)}, "page": None}
    compare = presenter_record.compare_text(screen, progress)
    shown = "\n".join((m.label, m.detail, compare))
    assert outcome.busy  # never replayed to a later visitor
    for phrase in PRESENTER[key]:
        assert phrase not in m.label + m.detail, (phrase, m)
    if screen.predict is not None and key not in COUNTED:
        assert m.noisy and "on a busy machine" in compare
        assert GUESS_WHY not in shown and not any(g in shown for g in GUESSED)


def test_a_short_measurement_waits_for_the_cpu_counters(lm):
    """A run shorter than the /proc/stat ticks can see still gets the other-programs signal."""
    if noise.cpu_reading().machine_busy_s is None:
        pytest.skip("no /proc/stat here: the other-programs CPU signal is Linux only")
    judged, _ = noise.end(lm.device, noise.begin(lm.device, calibrate=False))
    assert judged.others_cpu is not None
