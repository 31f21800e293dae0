"""The speculative race, the k sweep and the batch measurement on the real model (short runs:
behaviour here, speed in bench/measure.py)."""
import pytest

from inference.errors import SettingOutOfRangeError
from inference.experiments.shared_results import SharedResults
from inference.experiments.spec_expectation import batch_interplay
from inference.experiments.speculative_race import (
    SPEC_PROMPTS,
    PlainStep,
    race_updates,
    spec_prompt,
    spec_race,
    summarize_spec_race,
    sweep_k,
)
from inference.speculative import SpecPass, make_draft
from inference.tokens import prompt_ids

NEW = 12


@pytest.fixture(scope="module")
def edit_ids(lm):
    return prompt_ids(lm.tokenizer, SPEC_PROMPTS["edit"])


def test_speculative_race_lanes_take_turns_and_agree(lm, edit_ids):
    records = list(spec_race(lm, edit_ids, make_draft(lm, "prompt_lookup"), 4, NEW))
    passes = [r for r in records if isinstance(r, SpecPass)]
    plain = [r for r in records if isinstance(r, PlainStep)]
    assert len(plain) == passes[-1].tokens_so_far == NEW
    # after each pass the plain lane has caught up exactly: it never runs ahead
    made = 0
    for r in records:
        if isinstance(r, SpecPass):
            made = r.tokens_so_far
        else:
            assert r.index < made
    s = summarize_spec_race(lm, records, len(edit_ids), "prompt_lookup", 4, bandwidth_gbs=10.0)
    assert s.identical and s.new_tokens == NEW and s.passes == len(passes) - 1
    assert s.tokens_per_pass == (NEW - 1) / s.passes
    assert s.accepted == sum(p.accepted for p in passes) and s.accepted > 0  # lookup pays here
    assert s.plain_seconds == sum(p.seconds for p in plain[1:])
    assert s.spec_seconds == sum(p.seconds for p in passes[1:])
    assert s.ceiling_tokens_per_s == 10.0e9 / s.bytes_per_token
    assert s.verdict in ("faster", "slower", "within noise")


def test_speculative_race_updates_stream_passes_then_the_summary(lm, edit_ids):
    updates = list(race_updates(lm, edit_ids, make_draft(lm, "prompt_lookup"), 2, 6))
    assert all(u.summary is None for u in updates[:-1]) and updates[-1].summary is not None
    counts = [len(u.passes) for u in updates]
    assert counts == sorted(counts) and counts[0] >= 1
    assert all(u.plain_tokens >= u.passes[-1].tokens_so_far for u in updates[:-1])
    last = updates[-1]
    assert last.summary.new_tokens == last.passes[-1].tokens_so_far == last.plain_tokens == 6


def test_speculative_sweep_reports_every_draft_and_k(lm, edit_ids):
    shared = SharedResults()
    drafts = [make_draft(lm, "prompt_lookup"), make_draft(lm, "early_exit_4")]
    updates = list(sweep_k(lm, edit_ids, drafts, ks=(1, 3), new_tokens=4, shared=shared))
    assert updates[-1].finished and not any(u.finished for u in updates[:-1])
    points = updates[-1].points
    assert [(p.draft, p.k) for p in points] == [("prompt_lookup", 1), ("prompt_lookup", 3),
                                                 ("early_exit_4", 1), ("early_exit_4", 3)]
    assert all(p.identical for p in points)
    assert all(p.proposed <= p.k * p.passes for p in points)
    with pytest.raises(SettingOutOfRangeError):
        next(sweep_k(lm, edit_ids, drafts, ks=(0,)))


def test_speculative_batch_costs_are_measured_per_batch(lm, edit_ids):
    updates = list(batch_interplay(lm, edit_ids, k=2, batches=(1, 2), repeats=2))
    costs = updates[-1].points
    assert updates[-1].finished and [c.batch for c in costs] == [1, 2]
    assert all(c.plain_seconds > 0 and c.verify_seconds > 0 for c in costs)
    assert all({c.plain_bound, c.verify_bound} <= {"memory", "compute", "neither"} for c in costs)


def test_speculative_workload_names(lm):
    assert "Fix the spelling" in spec_prompt("edit")
    with pytest.raises(SettingOutOfRangeError, match="Unknown workload"):
        spec_prompt("poem")
