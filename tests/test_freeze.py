"""A lesson measurement must not freeze the class's chat, on the real model.

Four chats stream from a real `Server` while the KV race and then the batch sweep run through
`guarded(..., alone=server)`, as the app wires them. Everything that runs on the one compute
thread is logged in order: each server step ("step"), the end of each measurement job ("job",
logged inside the job, at its yield) and every stopwatch start/stop in the two experiments.
The log, not a wall clock, decides: every chat got tokens during the measurements, no
measurement jobs took more than the steps repaid (a step's surplus is credit for short jobs,
at most that step's time), and no timed pass ever had a server step (or the end of a job)
inside it. And the caption says how many chats were served."""
from __future__ import annotations

import contextlib

import pytest

from chart_reading import caption_text
from inference.config import LIMITS, Settings
from inference.experiments import batch_sweep, kv_race
from inference.server import Server
from inference.tokens import prompt_ids
from lessons import batching_handlers, kv_cache_handlers
from lessons.common.feedback import guarded
from polling import wait_for
from turn_log import log_turns
from visualizations.style import sharing_sentence

CHATS = ["Write a long story about a lighthouse keeper and the sea.",
         "Explain in detail how bread is made, step by step.",
         "Describe every planet of the solar system at length.",
         "Write a long letter to a friend about your summer."]




def logged_stopwatch(real, log: list):
    @contextlib.contextmanager
    def timed(device):
        log.append("t+")
        with real(device) as t:
            yield t
        log.append("t-")
    return timed


def jobs(gen, log: list):
    """The handler's generator with the end of each of its jobs logged (inside the job)."""
    for item in gen:
        log.append("job")
        yield item


@pytest.fixture(scope="module")
def freeze_run(lm):
    """Four chats streaming while the race and the sweep run back to back; the log."""
    log: list[str] = []
    srv = Server(lm, Settings(server_rows=8))
    real_step = srv._step

    def step():
        log.append("step")
        return real_step()

    srv._step = step  # the loop looks it up on every step
    log_turns(srv, log)  # every job's and step's compute seconds
    patch = pytest.MonkeyPatch()
    for module in (kv_race, batch_sweep):
        patch.setattr(module, "stopwatch", logged_stopwatch(module.stopwatch, log))
    settings = LIMITS
    chats = [srv.submit(prompt_ids(lm.tokenizer, c), max_new_tokens=LIMITS.new_tokens.high)
             for c in CHATS]
    try:
        assert wait_for(lambda: all(r.generated for r in chats)), "the chats never started"
        before = [len(r.generated) for r in chats]
        jobs_before, log_start = srv.turns.jobs, len(log)
        race = guarded(lambda p, n, g: jobs(kv_cache_handlers.race_frames(
            lm, settings, p, n, g), log), alone=srv)
        race_frames = list(race(LIMITS.default_prompt, 6, None))
        sweep = guarded(lambda: jobs(batching_handlers.sweep_frames(
            lm, settings, None, max_batch=4, steps=3, budget_mb=None), log), alone=srv)
        sweep_frames = list(sweep())
        after = [len(r.generated) for r in chats]
        yield dict(log=log[log_start:], before=before, after=after, chats=chats,
                   race=race_frames, sweep=sweep_frames,
                   jobs=srv.turns.jobs - jobs_before)
    finally:
        patch.undo()
        for r in chats:
            r.cancel()
        srv.close()


def test_freeze_every_chat_gets_tokens_while_lessons_measure(freeze_run):
    run = freeze_run
    assert run["jobs"] >= len(run["race"]) + len(run["sweep"])  # every job took its turn
    for k, (b, a) in enumerate(zip(run["before"], run["after"])):
        assert a > b, f"chat {k} got no token while the race and the sweep ran"


def _window(run) -> tuple[list[tuple[int, float]], float]:
    """The timed jobs (+1) and steps (-1) from the first job to the server's last step, and
    the seconds of the step just before that first job (the credit it may have left)."""
    timed = [e for e in run["log"] if isinstance(e, tuple)]
    last_step = max(i for i, (sign, _) in enumerate(timed) if sign < 0)
    first_job = min(i for i, (sign, _) in enumerate(timed) if sign > 0)
    before = [s for sign, s in timed[:first_job] if sign < 0]
    return timed[first_job:last_step + 1], (before[-1] if before else 0.0)


def test_freeze_jobs_between_two_steps_spend_at_most_one_step_of_credit(freeze_run):
    """While chats wait, the jobs run between two server steps took (but the last of them) no
    more than the step before them: short jobs share a step's time, none starves the chats."""
    window, _ = _window(freeze_run)
    step_s, jobs_s = None, []
    for sign, s in window + [(-1, 0.0)]:
        if sign > 0:
            jobs_s.append(s)
            continue
        if step_s is not None and jobs_s:
            assert sum(jobs_s[:-1]) <= step_s + 1e-3, \
                f"jobs of {jobs_s} s ran after a step of {step_s:.3f} s while chats waited"
        step_s, jobs_s = s, []


def test_freeze_the_server_keeps_about_half_the_compute_thread(freeze_run):
    """While chats wait, the server's steps repay each measurement job's compute time before
    the next job is queued: summed, the steps (and the credit the one before the first job
    left) took at least the jobs' time but the last's."""
    window, credit = _window(freeze_run)
    jobs_s = [s for sign, s in window if sign > 0]
    steps_s = sum(s for sign, s in window if sign < 0)
    assert len(jobs_s) > 5 and steps_s + credit >= sum(jobs_s) - max(jobs_s)


def test_freeze_no_timed_pass_straddles_a_server_step_or_a_job(freeze_run):
    log, inside = [e for e in freeze_run["log"] if isinstance(e, str)], False
    assert log.count("t+") == log.count("t-") > 0
    for event in log:
        if event == "t+":
            assert not inside
            inside = True
        elif event == "t-":
            inside = False
        else:  # a server step or the end of a job (a yield) inside a stopwatch: dishonest
            assert not inside, f"{event} inside a timed pass"


def test_freeze_the_captions_count_the_chats_served_meanwhile(freeze_run):
    chats = len(freeze_run["chats"])
    race_caption = caption_text(freeze_run["race"][-1].plot)
    assert f"{chats} chats answered between passes" in race_caption
    sweep_caption = [f.throughput for f in freeze_run["sweep"] if f.throughput is not None][-1]
    assert "between passes" in caption_text(sweep_caption)


def test_freeze_sharing_sentence_for_no_chat_and_for_some():
    assert sharing_sentence(0).endswith("no chat was served")
    assert sharing_sentence(1).endswith("; 1 chat answered between passes")
    assert sharing_sentence(12).endswith("; 12 chats answered between passes")
    assert "chat" not in sharing_sentence(None)  # not counted: nothing said about chats
    for n in (None, 0, 5):
        assert sharing_sentence(n).startswith("each timed pass had the model to itself")


def test_freeze_long_loops_yield_between_timed_stretches(lm, monkeypatch):
    """The prefill sweep's one-token-at-a-time side and the presenter's KV race and prefill
    race end a job (yield) between timed stretches, never inside one: a chat waits one
    stretch, not a run. Each presenter part is a step line ("k of N"), one per stretch."""
    from inference.experiments import prefill_sweep as sweep_module
    from lessons import presenter_handlers

    log: list[str] = []
    for module in (sweep_module, kv_race):
        monkeypatch.setattr(module, "stopwatch", logged_stopwatch(module.stopwatch, log))
    monkeypatch.setattr(presenter_handlers, "RACE_TOKENS", 4)
    n = 2 * sweep_module.SEQUENTIAL_STRETCH + 8  # three stretches
    feeding = [p.feeding for p in jobs(sweep_module.prefill_sweep(lm, [n], n), log)]
    stretch = sweep_module.SEQUENTIAL_STRETCH
    assert feeding == [stretch, 2 * stretch, 0]  # two stretches in progress, then the point
    race_parts = list(jobs(presenter_handlers.measure_steps("kv_race", lm, LIMITS, None), log))
    steps = [p for p in race_parts if isinstance(p, presenter_handlers.Step)]
    assert len(steps) == 2 * 4 and race_parts[-1].key == "kv_race"  # "step k of N" each
    monkeypatch.setattr(presenter_handlers, "PREFILL_TOKENS", n)
    prefill_parts = list(jobs(presenter_handlers.measure_steps("prefill_race", lm, LIMITS,
                                                               None), log))
    assert [p.done for p in prefill_parts[:-1]] == [stretch, 2 * stretch, n]  # a part each
    assert {p.total for p in prefill_parts[:-1]} == {n} and prefill_parts[-1].key == "prefill_race"
    inside = False
    for event in log:
        assert not (inside and event == "job"), "a yield inside a timed stretch"
        inside = {"t+": True, "t-": False}.get(event, inside)
