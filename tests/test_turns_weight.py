"""Measurements and chats share the compute thread fairly by visitor (`compute_thread.py`),
on the real server: a measurement a room waits on takes up to `Settings.measure_weight` times the
steps' compute between two steps, one visitor's beside many chats a share that small, and no run
of jobs ever takes more than its weight allows. Hand-made jobs (a small matmul each) stand in for
a lesson's decode steps; every job and step is timed where `ComputeTurns` times it."""
from __future__ import annotations

import pytest
import torch

from inference.config import LIMITS, Settings
from inference.server import Server
from inference.tokens import prompt_ids
from polling import wait_for
from turn_log import log_turns

CHATS = ["Write a long story about a lighthouse keeper and the sea.",
         "Explain in detail how bread is made, step by step."]
STEPS = 6  # server steps among the measurement's jobs
MOST_JOBS = 20_000
WEIGHT = 3.0


def turns_log(lm, measuring: int) -> list[tuple[float, float]]:
    """(sign, seconds) of every job (+) and step (-) while two visitors chat and a measurement
    that `measuring` visitors wait on runs small jobs, from its first job on."""
    srv = Server(lm, Settings(server_rows=4, measure_weight=WEIGHT))
    srv.turns.measuring = lambda: measuring
    log: list[tuple[float, float]] = []
    log_turns(srv, log)
    chats = [srv.submit(prompt_ids(lm.tokenizer, c), max_new_tokens=LIMITS.new_tokens.high,
                        visitor=f"visitor-{k}") for k, c in enumerate(CHATS)]
    weight = next(lm.model.parameters())
    x = torch.ones(384, 384, dtype=weight.dtype, device=weight.device)
    try:
        assert wait_for(lambda: all(r.generated for r in chats)), "the chats never started"
        with srv.turns.alongside():  # jobs until the server has stepped STEPS times among them
            start = len(log)
            for _ in range(MOST_JOBS):
                srv.turns.turn(lambda: float((x @ x).sum()))
                if sum(sign < 0 for sign, _ in log[start:]) >= STEPS:
                    break
        return log[start:]
    finally:
        for r in chats:
            r.cancel()
        srv.close()
        assert not srv._thread.is_alive(), "the server's loop missed its close while making way"


def runs_between_steps(log) -> list[tuple[float, list[float]]]:
    """(a step's seconds, the jobs that ran after it before the next step), while chats wait."""
    last_step = max(i for i, (sign, _) in enumerate(log) if sign < 0)
    runs, step_s = [], None
    for sign, s in log[:last_step + 1]:
        if sign < 0:
            step_s = s
            runs.append((s, []))
        elif step_s is not None:
            runs[-1][1].append(s)
    return [(s, jobs) for s, jobs in runs if jobs]


def slack(jobs: list[float]) -> float:
    """This test times each job from outside `ComputeTurns`' own clock: a few µs more each."""
    return 1e-3 + 50e-6 * len(jobs)


@pytest.fixture(scope="module")
def logs(lm):
    return {"room": turns_log(lm, measuring=12), "one": turns_log(lm, measuring=1)}


def test_a_room_waiting_on_a_measurement_gets_up_to_its_weight_in_compute(logs):
    runs = runs_between_steps(logs["room"])  # 12 visitors waiting, 2 chatting: weight 3
    assert runs, "no jobs ran while the chats had work"
    for step_s, jobs in runs:  # all but the last job ran on the step's credit
        assert sum(jobs[:-1]) <= WEIGHT * step_s + slack(jobs), (step_s, jobs)
    assert max(sum(jobs[:-1]) / step_s for step_s, jobs in runs) > 1.0  # more than half


def test_one_visitor_beside_two_chats_gets_half_a_step_between_steps(logs):
    for step_s, jobs in runs_between_steps(logs["one"]):  # 1 waiting, 2 chatting: weight 1/2
        assert sum(jobs[:-1]) <= step_s / 2 + slack(jobs), (step_s, jobs)
