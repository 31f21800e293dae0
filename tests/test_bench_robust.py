"""bench/robust.py: the four headline figures quiet and beside a spinning core, at tiny sizes on
the real model (the keys the bench reports, each with its range), and `impossible_shown`
counting a figure a sanity bound would have withheld only when it was shown anyway."""
from __future__ import annotations

from bench import robust
from bench.robust import FIGURES, Figure, Sizes, report, spinner
from inference.experiments.noise import Robust

TINY = Sizes(race_tokens=4, batch=2, batch_steps=2, prefill_tokens=32, quant_tokens=4)


def test_tiny_run_reports_every_figure_quiet_and_loaded(lm):
    out = robust.measure_robust(lm, TINY, loads=("spinner",))
    for name in FIGURES:
        fig = out[name]
        assert fig["quiet"] > 0 and " over " in fig["quiet_range"], (name, fig)
        loaded = fig["spinner"]
        assert loaded["loaded"] > 0 and loaded["loaded_vs_quiet"] > 0, (name, loaded)
        assert loaded["off"] >= 1 and loaded["loaded_spread"] >= 0
    assert out["impossible_shown"] == 0
    assert set(robust.TARGETS) >= {"robust.impossible_shown", "robust.int4_speed.chats.off"}


def test_impossible_shown_counts_a_planted_figure_only_when_shown():
    fine = Robust(2.0, 1.9, 2.1, 5)
    shown = Figure(Robust(90.0, 80.0, 95.0, 5), None,
                   "one pass over 32 tokens measured 90.0× faster ...")  # planted: shown
    withheld = Figure(Robust(90.0, 80.0, 95.0, 5), "past its bound",
                      "one pass over 32 tokens measured 90.0× faster ...")
    quiet = {"kv_race": Figure(fine, None, None), "prefill_ratio": shown}
    assert report(quiet, {})["impossible_shown"] == 1
    out = report({**quiet, "prefill_ratio": withheld},
                 {"spinner": {"prefill_ratio": shown, "kv_race": Figure(fine, None, None)}})
    assert out["impossible_shown"] == 1 and out["withheld"] == 1  # the loaded run showed it
    assert out["prefill_ratio"]["quiet"] is None  # a withheld figure is no quiet figure
    assert out["prefill_ratio"]["spinner"]["loaded_vs_quiet"] is None
    assert out["kv_race"]["spinner"]["loaded_vs_quiet"] == 1.0


def test_spinner_runs_only_inside_its_block():
    with spinner() as proc:
        assert proc.poll() is None  # it said it spins: running
    assert proc.returncode is not None  # ended and reaped with the block
