"""'This machine' under the noise rule: the decode speed read from its own steps' times, a busy
run's figure shown with the notice and no share of the ceiling, a speed past the bandwidth
ceiling measured again and then withheld with its reason, this machine's quiet reference shown
beside a busy run (and written only by a quiet one), the size table predicting from it."""
from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace

import pytest

from inference.experiments import quiet_reference, roofline
from inference.experiments.noise import judge
from inference.experiments.roofline import Roofline, RooflineProgress, watched_roofline
from lessons import machine_handlers
from visualizations.noise_view import BUSY
from visualizations.step_charts import roofline_md

QUIET_STEPS = [0.050, 0.051, 0.049, 0.050, 0.052, 0.050, 0.049, 0.051] * 3
# interference: every third step slowed 10× (another program took the cores)
BUSY_STEPS = [s * 10 if k % 3 == 0 else s for k, s in enumerate(QUIET_STEPS)]
WEIGHTS = 480_000_000


def planted(*rooflines: Roofline, steps=QUIET_STEPS):
    """A measurement that returns `rooflines` in turn, each with `steps`, and records the
    bandwidth each run was handed (None: the machine's shared figure)."""
    handed = []

    def runs(lm, new_tokens, shared, bandwidth_gbs):
        r = rooflines[len(handed)]
        handed.append(bandwidth_gbs)
        yield RooflineProgress(len(steps), len(steps), r.bandwidth_gbs,
                               r.measured_tokens_per_s, r, tuple(steps))
    return runs, handed


def roof(tokens_per_s: float, bandwidth_gbs: float = 20.0) -> Roofline:
    return Roofline(bandwidth_gbs=bandwidth_gbs, bytes_per_token=500_000_000,
                    measured_tokens_per_s=tokens_per_s)


CPU = SimpleNamespace(device="cpu")


def test_interference_reads_busy_and_draws_no_share_of_the_ceiling():
    runs, _ = planted(roof(10.0), steps=BUSY_STEPS)
    busy = watched_roofline(CPU, runs=runs)
    assert busy.noise.busy and busy.step_seconds == tuple(BUSY_STEPS)
    md = roofline_md(busy.roofline, WEIGHTS, busy.noise, busy.attempt)
    assert BUSY.capitalize() in md and "**10.0 tokens/s**, noisy" in md
    assert "% of the ceiling" not in md and "no verdict from a busy machine" in md
    runs, _ = planted(roof(10.0))
    quiet = watched_roofline(CPU, runs=runs)
    assert not quiet.noise.busy
    md = roofline_md(quiet.roofline, WEIGHTS, quiet.noise)
    assert "**25%** of the ceiling" in md and BUSY.capitalize() not in md


def test_a_speed_past_the_ceiling_is_measured_again_then_withheld(monkeypatch):
    reads = []
    monkeypatch.setattr(roofline, "measure_read_bandwidth",
                        lambda device: reads.append(device) or 3.0)
    runs, handed = planted(roof(10.0, 2.0), roof(10.0, 3.0))  # ceilings 4 and 6 tokens/s
    w = watched_roofline(CPU, runs=runs)
    assert handed == [None, 3.0] and reads == ["cpu"] and w.attempt == 1  # read again, higher
    md = roofline_md(w.roofline, WEIGHTS, w.noise, w.attempt)
    assert "not a possible result, measured twice" in md and "ceiling of 6.0 tokens/s" in md
    assert "**10.0 tokens/s**" not in md and "167%" not in md
    runs, handed = planted(roof(10.0, 2.0), roof(4.5, 3.0))  # disturbed once, then possible
    w = watched_roofline(CPU, runs=runs)
    assert w.attempt == 1 and w.roofline.impossible is None
    assert "**75%** of the ceiling" in roofline_md(w.roofline, WEIGHTS, w.noise, w.attempt)


@pytest.fixture
def reference_file(tmp_path, monkeypatch):
    path = tmp_path / quiet_reference.FILE
    monkeypatch.setattr(quiet_reference, "default_path", lambda: str(path))
    return path


def test_the_quiet_reference_is_written_by_a_quiet_run_and_shown_beside_a_busy_one(
        lm, reference_file):
    busy, quiet = judge(spread=0.9), judge(spread=0.02)
    live = roof(1.6, 2.0)
    assert quiet_reference.for_decode(live, "m", 24, busy) is None
    assert not reference_file.exists()  # a busy run writes nothing
    assert quiet_reference.for_decode(roof(10.0, 2.0), "m", 24, quiet) is None  # impossible
    assert not reference_file.exists()
    ref = quiet_reference.for_decode(roof(2.5, 2.0), "m", 24, quiet)
    assert ref.value == 2.5 and reference_file.exists()
    assert quiet_reference.for_decode(live, "m", 24, busy) == ref  # read back, not replaced
    md = roofline_md(live, WEIGHTS, busy, reference=ref, now=datetime.now())
    assert "Decode speed, quiet" in md and "2.5 tokens/s" in md
    assert "This run, busy: 1.6 tokens/s" in md and "varied by 90%" in md
    assert "Decode speed, quiet" not in roofline_md(live, WEIGHTS, quiet, reference=ref)
    r = Roofline(2.0, lm.info.weight_bytes + 1_000_000, 1.0)
    sizes = machine_handlers.sizes_md(lm, r, busy, ref)
    assert "**2.5 tokens/s** (this machine's quiet reference" in sizes
    assert "this run was busy" in sizes
    alone = machine_handlers.sizes_md(lm, r, busy, None)
    assert "**1.0 tokens/s** (this run, on a busy machine): noisy" in alone
    assert "of its ceiling." not in alone
    assert "**1.0 tokens/s**, " in machine_handlers.sizes_md(lm, r, quiet, ref)


def test_on_the_real_model_the_machine_measurement_carries_its_reading(lm, reference_file):
    from test_busy_room import preset

    *_, view = machine_handlers.measure_machine_steps(lm, preset(lm))
    assert view.noise is not None and view.roofline.measured_tokens_per_s > 0
    speed = view.roofline_md.split("- **Decode speed")[1]
    if view.roofline.impossible:
        assert "not a possible result" in speed
    elif view.noise.busy:
        assert BUSY.capitalize() in view.roofline_md and "noisy" in speed
    else:
        assert f"**{view.roofline.fraction:.0%}** of the ceiling" in speed
        assert reference_file.exists()  # a quiet, possible run is this machine's reference
