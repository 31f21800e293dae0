"""Lesson 3b's expected value on the real model: the formula drawn beside a finished race (its
α and times, no model run of its own), and the sampled acceptance rule run and counted."""
from inference.config import Settings
from inference.experiments.shared_results import SharedResults
from inference.experiments.spec_expectation import expected_tokens_per_pass
from lessons.speculative_handlers import PROMPT, expectation_view, run_sampled, run_spec_race

SETTINGS = Settings()
NEW = 10


def test_the_formula_is_drawn_from_the_last_race(lm):
    shared = SharedResults()
    s = list(run_spec_race(lm, SETTINGS, shared, PROMPT, "prompt_lookup", 3, NEW))[-1].summary
    assert s.judged >= s.accepted and s.judged <= s.proposed
    view = expectation_view(lm, SETTINGS, shared, PROMPT, NEW, s)
    formula = [t for t in view.chart.data if t.name == "formula (theoretical)"]
    alpha = s.accepted / s.judged if s.judged else 0.0
    assert list(formula[0].x) == list(range(1, 9))
    assert formula[0].y[2] == expected_tokens_per_pass(alpha, 3)  # at the race's k = 3
    race = [t for t in view.chart.data if t.name == "your race (measured)"]
    assert race[0].y[0] == s.tokens_per_pass and race[1].y[0] == s.speedup
    assert f"**{s.tokens_per_pass:.2f}** measured" in view.text and "By the formula" in view.text
    empty = expectation_view(lm, SETTINGS, shared, PROMPT, NEW, None)
    assert "Race first" in empty.text


def test_the_sampled_rule_counts_kept_guesses_at_a_temperature(lm):
    frames = list(run_sampled(lm, SETTINGS, None, PROMPT, "prompt_lookup", 3, NEW, 1.0))
    run = frames[-1].run
    assert run is not None and all(f.run is None for f in frames[:-1])
    assert run.temperature == 1.0 and run.decoded == NEW - 1 and run.passes >= 1
    assert 0 <= run.accepted <= run.judged
    assert frames[-1].passes_html.count("lab-spec-pass") == run.passes + 1  # + the prefill
    text = frames[-1].text
    assert "Sampled rule at temperature 1" in text and f"made **{run.tokens_per_pass:.2f}**" in text
    again = list(run_sampled(lm, SETTINGS, None, PROMPT, "prompt_lookup", 3, NEW, 1.0))[-1].run
    assert again.text == run.text  # seeded: the same draws
