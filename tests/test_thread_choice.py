"""The server's CPU threads per pass (inference/thread_choice.py): chosen from timed passes.

Pure parts on hand-made timings; then the real server on the real model: its passes record a
thread count, its figures reach the live view, its rows still equal solo runs, and a pass
leaves the compute thread's count as it found it (a lesson measures at the default)."""
from __future__ import annotations

import torch

from inference import compute_thread
from inference.config import Settings
from inference.server import Server
from inference.thread_choice import ThreadChoice, num_threads


def generate_reference(lm, ids: list[int], n: int) -> list[int]:
    """`model.generate(do_sample=False)`: the tokens a greedy row must get."""
    x = torch.tensor([ids], device=lm.device)
    with torch.inference_mode():
        out = lm.model.generate(x, attention_mask=torch.ones_like(x), do_sample=False,
                                max_new_tokens=n, min_new_tokens=n, pad_token_id=0)
    return out[0, len(ids):].tolist()


def feed(choice: ThreadChoice, kind: str, tokens: int, per_token: dict[int, float], n: int
         ) -> list[int]:
    """`n` passes timed as `per_token[threads] * tokens` seconds; the counts used, in order."""
    used = []
    for _ in range(n):
        t = choice.choose(kind, tokens)
        choice.record(kind, tokens, t, per_token[t] * tokens)
        used.append(t)
    return used


def test_every_count_is_tried_then_the_fastest_is_used():
    choice = ThreadChoice((2, 1), probe_every=8)
    used = feed(choice, "decode", 30, {2: 0.010, 1: 0.040}, 8)
    assert used[:2] == [2, 1]  # the default first, then the other once
    assert used[2:] == [2] * 6
    fig = {f.threads: f for f in choice.figures()}
    assert fig[2].chosen and not fig[1].chosen and fig[1].seconds_per_token == 0.040


def test_a_busy_machine_moves_the_choice_to_one_thread_and_a_quiet_one_back():
    choice = ThreadChoice((2, 1), probe_every=4, probe_max=64)
    feed(choice, "decode", 30, {2: 0.008, 1: 0.011}, 10)  # quiet: 2 threads win
    busy = feed(choice, "decode", 30, {2: 0.120, 1: 0.011}, 40)  # another program holds a core
    assert 2 in busy[:2] and busy[-20:].count(1) >= 18  # moves to 1 after a slow pass or two
    quiet = feed(choice, "decode", 30, {2: 0.008, 1: 0.011}, 70)  # the other program ended
    assert quiet[-10:] == [2] * 10  # a later try found 2 threads fast again


def test_losing_tries_grow_rarer_up_to_the_cap():
    choice = ThreadChoice((2, 1), probe_every=4, probe_max=16)
    used = feed(choice, "decode", 30, {2: 0.100, 1: 0.010}, 80)
    tries = [i for i, t in enumerate(used) if t == 2]
    gaps = [b - a for a, b in zip(tries, tries[1:])]
    assert gaps[0] < gaps[-1] and max(gaps) <= 16 + 1, gaps
    assert used.count(2) <= 8  # a losing count costs a handful of passes in 80


def test_shapes_are_chosen_apart():
    choice = ThreadChoice((2, 1))
    feed(choice, "decode", 30, {2: 0.010, 1: 0.040}, 6)
    feed(choice, "prefill", 256, {2: 0.020, 1: 0.005}, 6)
    assert choice.choose("decode", 31) == 2  # 16-31 tokens: one shape
    assert choice.choose("prefill", 300) == 1  # 256-511 tokens
    assert choice.choose("decode", 1) == 2  # never timed: the default first


def test_for_device_and_run_restore_the_count():
    assert ThreadChoice.for_device("cuda") is None
    assert ThreadChoice.for_device("cpu", fixed=1).counts == (1,)
    n = torch.get_num_threads()
    choice = ThreadChoice.for_device("cpu")
    assert choice.counts[0] == n and choice.counts[-1] == 1
    forced = ThreadChoice((1,))
    with num_threads(forced.choose("decode", 4)) as threads:
        assert threads == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == n


def test_the_server_records_its_threads_and_its_rows_equal_solo_runs(lm, chat_ids):
    srv = Server(lm, Settings(server_threads=0))
    try:
        reqs = [srv.submit(chat_ids[: len(chat_ids) - i], None, 12) for i in range(3)]
        got = [[e.token_id for e in r.events()] for r in reqs]
        stats = srv.stats()
    finally:
        srv.close()
    for r, tokens in zip(reqs, got):
        assert tokens == generate_reference(lm, r.prompt_ids, 12)
    if torch.device(lm.device).type == "cpu":
        counts = ThreadChoice.for_device(lm.device).counts
        assert {s.threads for s in stats.steps_detail} <= set(counts)
        assert {s.threads for s in stats.steps_detail} - {0}
        assert stats.threads and any(f.chosen for f in stats.threads)
        # a lesson's job on the compute thread still sees the default count
        assert compute_thread.run(torch.get_num_threads) == counts[0]
    else:
        assert stats.threads == () and {s.threads for s in stats.steps_detail} == {0}


def test_a_little_faster_is_not_enough_to_leave_the_default():
    choice = ThreadChoice((2, 1), probe_every=4, margin=1.25)
    used = feed(choice, "decode", 30, {2: 0.010, 1: 0.009}, 12)  # 1 thread only 1.1x faster
    assert used[2:].count(2) >= 8
    assert next(f for f in choice.figures() if f.threads == 2).chosen
    used = feed(choice, "decode", 30, {2: 0.010, 1: 0.005}, 30)  # 2x faster: it moves
    assert used[-8:].count(1) >= 6
