"""The one rule that says whether the machine was busy while measuring
(inference/experiments/noise.py): hand-made quiet and busy readings, then a real busy process.

The busy test starts a process that spins a core for a bounded time and checks that a real
short measurement records it: the figure asserted is the other programs' CPU share the watch
recorded (on 2 shared cores timing luck alone would not be reliable)."""
from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import time
from dataclasses import replace

import pytest
import torch

from inference.config import LIMITS
from inference.experiments import noise
from inference.experiments.noise import CpuReading, judge, others_cpu_share, repeat_spread
from polling import wait_for
from test_race_under_load import cpu_seconds
from visualizations.noise_view import BUSY, busy_notice_html, quiet_note, supports_verdict


def test_quiet_readings_allow_a_verdict():
    quiet = judge(spread=0.05, calibration_ratio=1.04, others_cpu=0.03)
    assert not quiet.busy and not quiet.reasons and supports_verdict(quiet)
    assert busy_notice_html(quiet) == ""
    assert quiet_note(quiet) == ("machine quiet while measuring: repeats within 5%, test product "
                                 "steady (1.04×), other programs 3% of the CPU")


@pytest.mark.parametrize("readings, reason", [
    (dict(spread=0.6), "repeats of the same step varied by 60%"),
    (dict(calibration_ratio=1.8), "ran 1.8× slower"),
    (dict(others_cpu=0.5), "other programs used 50% of this machine's CPU"),
])
def test_any_busy_signal_marks_the_run_busy(readings, reason):
    busy = judge(**readings)
    assert busy.busy and not supports_verdict(busy)
    notice = busy_notice_html(busy)
    assert BUSY.capitalize() in notice and html.escape(reason) in notice


def test_limits_come_from_settings_and_missing_signals_count_as_no_signal():
    assert not judge().busy  # nothing measured: nothing says busy (the caller decides verdicts)
    assert not supports_verdict(None)  # no reading yet: no verdict
    strict = replace(LIMITS, noise_spread_limit=0.01)
    assert judge(spread=0.05, settings=strict).busy and not judge(spread=0.05).busy


def test_spread_and_cpu_share_arithmetic():
    assert repeat_spread([0.1, 0.1, 0.1]) is None  # too few repeats to say
    assert repeat_spread([1.0, 1.0, 1.0, 1.0]) == 0.0
    assert repeat_spread([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(2.0 / 3.0)
    ncpu = os.cpu_count()
    a = CpuReading(wall_s=10.0, machine_busy_s=100.0, own_s=5.0)
    b = CpuReading(wall_s=12.0, machine_busy_s=100.0 + 1.0 * ncpu, own_s=5.0 + 0.5 * ncpu)
    assert others_cpu_share(a, b) == pytest.approx(0.25)  # half a core each of ncpu, in 2 s
    assert others_cpu_share(a, replace(b, wall_s=10.1)) is None  # too short to count ticks
    assert others_cpu_share(a, replace(b, machine_busy_s=None)) is None  # not Linux


def test_a_real_busy_process_is_reported(lm):
    """A spinning process on this machine: the watch around a real short measurement records
    other programs using at least the CPU the spinner was measured to use meanwhile (from its
    /proc record: beside the model's threads it may get less than a whole core), and so calls
    the run busy."""
    if noise.cpu_reading().machine_busy_s is None:
        pytest.skip("no /proc/stat here: the CPU-share signal is Linux only")
    spinner = subprocess.Popen([sys.executable, "-c",
                                "import time\nend = time.time() + 60\n"
                                "while time.time() < end: pass"])
    try:  # spinning already (its CPU time rising), not still starting Python, when the watch begins
        assert wait_for(lambda: cpu_seconds(spinner.pid) > 0.2, timeout=30), "spinner never ran"
        spun, started = cpu_seconds(spinner.pid), time.monotonic()
        watch = noise.begin(lm.device)
        ids = torch.tensor([[1, 2, 3, 4]], device=lm.device)
        steps = []
        with torch.inference_mode():
            while noise.cpu_reading().wall_s - watch.cpu.wall_s < 1.0:  # a real model, ~1 s
                with noise.stopwatch(lm.device) as t:
                    lm.model(ids)
                steps.append(t[0])
        judged, _ = noise.end(lm.device, watch, steps)
        spun = cpu_seconds(spinner.pid) - spun
        share = spun / ((time.monotonic() - started) * (os.cpu_count() or 1))  # of the machine
    finally:
        spinner.kill()
        spinner.wait()
    assert judged.others_cpu is not None and judged.others_cpu >= 0.8 * share, judged
    if share > LIMITS.noise_others_cpu_limit:  # e.g. 2 cores: one spinner is up to half of it
        assert judged.busy and "numbers are noisy" in busy_notice_html(judged)


def test_a_split_with_a_part_at_zero_or_a_busy_run_is_not_drawn():
    from types import SimpleNamespace

    from visualizations.step_charts import split_unreliable_figure, split_unreliable_md

    quiet, busy = judge(others_cpu=0.02), judge(others_cpu=0.6)
    assert noise.split_holds(quiet, [0.060, 0.030], 0.100)
    assert not noise.split_holds(quiet, [0.100, 0.0], 0.100)  # "other operations 0.0 ms"
    assert not noise.split_holds(quiet, [0.090, 0.030], 0.100)  # parts beyond the step
    assert not noise.split_holds(busy, [0.060, 0.030], 0.100)
    p = SimpleNamespace(steps=8, step_seconds=0.1)
    md = split_unreliable_md(p, busy)
    assert "numbers are noisy — run again" in md and "100.0 ms" in md
    assert "not reliable" in split_unreliable_md(p, quiet)
    assert not re.search(r"(?<![\d.])0\.0 ms", md)  # no part shown at 0.0 ms
    fig = split_unreliable_figure(p, "the split was not reliable on this run: run again")
    assert not fig.data  # no bar drawn for a part that was not measured
