"""The server's row cap from this machine's batch sweep (`inference.experiments.batch_sweep`): the
knee rule on hand-made sweeps (linear to the end, flat, a rise then noise within the margin),
the sweep read from a quiet-reference file, and the choice the app makes at start-up with the
real model's block pool: the knee from the file, the fallback with none, cut to a small pool,
and LLM_LAB_SERVER_ROWS winning over all of it."""
from __future__ import annotations

import doctest
import json
from dataclasses import replace

from inference.config import Settings
from inference.experiments import batch_sweep
from inference.experiments.batch_sweep import FALLBACK_ROWS, for_server, knee_rows, sweep_on_file
from inference.experiments.quiet_reference import this_machine


def test_the_rule_and_its_worked_examples():
    assert doctest.testmod(batch_sweep).failed == 0


def test_linear_to_the_end_gives_the_largest_batch():
    assert knee_rows([(b, 25.0 * b) for b in (1, 2, 4, 8, 16, 32, 64, 128)]) == 128


def test_flat_gives_one_row_and_falling_never_moves_it():
    assert knee_rows([(b, 40.0) for b in (1, 2, 4, 8)]) == 1
    assert knee_rows([(1, 40.0), (2, 30.0), (4, 20.0)]) == 1


def test_noise_within_the_margin_does_not_move_the_knee():
    rise = [(1, 100.0), (2, 190.0), (4, 350.0), (8, 600.0)]
    wobble = [(16, 640.0), (32, 580.0), (64, 655.0)]  # within 10 % of 600, up and down
    assert knee_rows(rise + wobble) == 8
    assert knee_rows(rise + wobble, margin=0.05) == 16  # a tighter margin reads 640 as a rise
    assert knee_rows(list(reversed(rise + wobble))) == 8  # order of the points does not matter


def reference(path, gains: dict[int, float], machine: str | None = None) -> str:
    """A quiet-reference file holding batch gains over batch 1 (and one other figure)."""
    machine = machine or this_machine()
    figures = {f"batch_gain {b}÷1 12 steps after 30 float32": g for b, g in gains.items()}
    figures["kv_race 24 tokens after 30 float32"] = 3.0
    data = {"machine": machine, "figures": {k: {
        "key": k, "value": v, "label": f"{v}×", "measured_at": "2026-01-01T09:00:00",
        "machine": machine} for k, v in figures.items()}}
    path.write_text(json.dumps(data))
    return str(path)


def test_the_sweep_on_file_is_its_batch_gains(tmp_path):
    path = reference(tmp_path / "q.json", {4: 3.5, 16: 10.0})
    assert sweep_on_file(path) == [(1, 1.0), (4, 3.5), (16, 10.0)]
    other = reference(tmp_path / "other.json", {4: 3.5}, machine="another CPU, 96 cores")
    assert sweep_on_file(other) == [] and sweep_on_file(str(tmp_path / "none.json")) == []


KNEE_AT_16 = {2: 1.9, 4: 3.6, 8: 6.5, 16: 11.0, 32: 11.8, 64: 12.0}


def test_the_app_takes_the_knee_from_this_machines_reference(lm, tmp_path):
    path = reference(tmp_path / "q.json", KNEE_AT_16)
    choice = for_server(Settings(), lm, reference=path, env={})
    assert choice.rows == 16 and "levels off after 16" in choice.why
    linear = reference(tmp_path / "linear.json", {8: 7.8, 64: 60.0})
    assert for_server(Settings(), lm, reference=linear, env={}).rows == 64
    assert for_server(Settings(), lm, reference=str(tmp_path / "none.json"),
                      env={"LLM_LAB_SERVER_ROWS": "0"}).rows == FALLBACK_ROWS


def test_the_cap_never_exceeds_the_pool_or_the_step_budget(lm, tmp_path):
    path = reference(tmp_path / "q.json", {8: 7.9, 128: 120.0})
    small = replace(Settings(), server_pool_blocks=64)  # 64 blocks of 16: four 256-token chats
    choice = for_server(small, lm, reference=path, env={})
    assert choice.rows == 4 and "block pool" in choice.why
    tight = replace(Settings(), step_token_budget=50)  # the pool holds more: the budget cuts
    assert for_server(tight, lm, reference=path, env={}).rows == 49


def test_an_explicit_row_count_wins(lm, tmp_path, monkeypatch):
    path = reference(tmp_path / "q.json", KNEE_AT_16)
    monkeypatch.setenv("LLM_LAB_SERVER_ROWS", "5")
    settings = Settings.from_env()
    choice = for_server(settings, lm, reference=path)
    assert (settings.server_rows, choice.rows) == (5, 5) and "LLM_LAB_SERVER_ROWS" in choice.why


def test_a_server_built_with_the_choice_holds_at_most_those_rows(lm, tmp_path):
    from inference.sampling import SamplingSettings
    from inference.server import Server

    choice = for_server(Settings(), lm, reference=reference(tmp_path / "q.json", KNEE_AT_16),
                        env={})
    srv = Server(lm, replace(Settings(), server_rows=choice.rows))
    try:
        with srv.turns.exclusive():  # all waiting before the first step plans
            reqs = [srv.submit(lm.tokenizer.encode(f"Count to {i}."), SamplingSettings(), 2)
                    for i in range(choice.rows + 4)]  # four more students than rows
        tokens = [[e.token_id for e in r.events() if e is not None] for r in reqs]
        assert all(len(t) == 2 for t in tokens)
        assert max(rows for _, rows, _ in srv.stats().history) == choice.rows == 16
    finally:
        srv.close()
