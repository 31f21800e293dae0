"""Lesson 3b on the real model: the race streams its passes and ends on cards whose numbers are
the summary's, the guess is set beside the measurement, a finished race is shared, bad input
gets a sentence, the batch measurement streams, and the presenter's screen measures."""
from dataclasses import replace

import pytest

from inference.config import Settings
from inference.errors import EmptyPromptError, InferenceInputError, SettingOutOfRangeError
from inference.experiments.shared_results import SharedResults
from inference.generation import stream
from lessons.common.prompt_input import encode_prompt
from lessons.presenter_handlers import measure_steps
from lessons.speculative_handlers import (
    PROMPT,
    SHARED_NOTE,
    run_batch,
    run_spec_race,
)
from visualizations.cards import times
from visualizations.noise_view import BUSY

NEW = 12
SETTINGS = Settings()


@pytest.fixture(scope="module")
def race_run(lm):
    shared = SharedResults()
    frames = list(run_spec_race(lm, SETTINGS, shared, PROMPT, "prompt_lookup", 4, NEW, guess=2.5))
    return shared, frames


def test_speculative_race_streams_passes_then_cards_from_the_summary(lm, race_run):
    _, frames = race_run
    *streamed, last = frames
    s = last.summary
    assert s is not None and all(f.summary is None for f in streamed)
    # one frame per finished pass, each with one more pass row than the one before
    rows = [f.passes_html.count("lab-spec-pass") for f in streamed if "lab-spec-pass" in
            f.passes_html]
    assert rows == list(range(1, len(rows) + 1)) and len(rows) >= 2
    assert last.passes_html.count("lab-spec-pass") == s.passes + 1  # + the prefill's row
    assert s.identical and s.new_tokens == NEW  # both lanes made the same tokens
    # the cards are the summary's own figures
    cards = last.cards_md
    busy = BUSY.capitalize() in cards  # judged busy (noise.py): the notice, no verdict
    for shown in (f"{s.tokens_per_pass:.2f}", f"{s.tokens_per_s:.1f} tok/s",
                  f"{s.plain_tokens_per_s:.1f} tok/s", times(s.speedup),
                  "noisy: run again" if busy else s.verdict,
                  f"{s.accepted} of {s.proposed}", "same tokens", "one-token ceiling"):
        assert shown in cards, shown
    assert 1 <= s.tokens_per_pass <= 5


def test_speculative_race_compares_the_guess_and_is_shared(lm, race_run):
    shared, frames = race_run
    s = frames[-1].summary
    assert "Predict, then measure" in frames[-1].cards_md and "2.5" in frames[-1].cards_md
    again = list(run_spec_race(lm, SETTINGS, shared, PROMPT, "prompt_lookup", 4, NEW, guess=0))
    if BUSY.capitalize() in frames[-1].cards_md:  # judged busy (noise.py): measured again
        assert len(again) > 1 and SHARED_NOTE not in again[-1].cards_md
        return
    assert len(again) == 1 and again[0].summary is s and SHARED_NOTE in again[0].cards_md
    assert "2.5" not in again[0].cards_md.split("Predict, then measure")[-1].split("\n")[0]


def test_speculative_race_tokens_are_plain_greedy_decodes(lm, race_run):
    _, frames = race_run
    plain = [e.token_id for e in stream(lm, encode_prompt(lm, SETTINGS, PROMPT),
                                        max_new_tokens=NEW)]
    assert [t for p in frames[-1].passes for t in p.new_ids] == plain
    assert "Pass 0" in frames[-1].passes_html and frames[-1].passes[0].index == 0


@pytest.mark.parametrize("prompt, draft, k, new, error, words", [
    ("", "prompt_lookup", 4, NEW, EmptyPromptError, "empty"),
    (PROMPT, "prompt_lookup", 0, NEW, SettingOutOfRangeError, "Draft length k"),
    (PROMPT, "prompt_lookup", 9, NEW, SettingOutOfRangeError, "between 1 and 8"),
    (PROMPT, "prompt_lookup", 2.5, NEW, SettingOutOfRangeError, "whole number"),
    (PROMPT, "prompt_lookup", None, NEW, SettingOutOfRangeError, "whole number"),
    (PROMPT, "prompt_lookup", 4, 10_000, SettingOutOfRangeError, "New tokens"),
    (PROMPT, "magic", 4, NEW, SettingOutOfRangeError, "choose one of"),
])
def test_speculative_bad_input_gets_a_sentence(lm, prompt, draft, k, new, error, words):
    with pytest.raises(error, match=words) as got:
        next(run_spec_race(lm, SETTINGS, None, prompt, draft, k, new))
    assert isinstance(got.value, InferenceInputError) and str(got.value).endswith((".", ")"))


def test_speculative_batch_handler_streams_and_derives(lm):
    small = replace(SETTINGS, spec_batches=(1, 2))
    frames = list(run_batch(lm, small, SharedResults(), PROMPT, 2, tokens_per_pass=2.0))
    assert [f.progress.split(":")[0] for f in frames] == ["Batch 1", "Batch 2", "Done"]
    table = frames[-1].text
    assert "| 1 |" in table and "| 2 |" in table and "derived" in table and "2.00" in table
    assert frames[0].text == ""  # nothing to read before the first measurement


def test_speculative_presenter_screen_measures(lm):
    *_, m = measure_steps("speculative", lm, SETTINGS, None)
    assert m.key == "speculative" and m.value >= 1 and m.shown == f"{m.value:.2f}"
    assert "guesses kept" in m.detail and "same tokens" in m.detail
