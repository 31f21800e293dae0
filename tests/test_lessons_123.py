"""Lessons 1-3: the panels' handler functions on the real model."""
import pytest

from inference.config import Settings
from inference.errors import InferenceInputError
from inference.generation import reshaped, stream
from inference.sampling import SamplingSettings
from inference.experiments.shared_results import SharedResults
from inference.tokens import prompt_ids
from lessons import decode_panel, prefill_panel, tokens_panel

SETTINGS = Settings()
PROMPT = "Write one sentence about the moon."
GREEDY = SamplingSettings()


def test_tokens_view_counts_and_template(tok):
    html, counts, note = tokens_panel.show_tokens(tok, "Hello world", False, 1000)
    assert "<sub>19556</sub>" in html and "**2** tokens" in counts
    html_t, counts_t, note_t = tokens_panel.show_tokens(tok, "Hello world", True, 1000)
    assert "&lt;|im_start|&gt;" in html_t and "special" in html_t
    assert "your 2 tokens become" in note_t
    with pytest.raises(InferenceInputError, match="characters"):
        tokens_panel.show_tokens(tok, "x" * 2000, False, 1000)


def test_cost_estimate_arithmetic(tok):
    md = tokens_panel.cost_md(tok, "Hello world", 1000, 2.0, 10.0)
    n_in = len(prompt_ids(tok, "Hello world"))
    assert f"**{n_in:,} input tokens**" in md
    assert f"${1000 * 10.0 / 1e6 + n_in * 2.0 / 1e6:.6f}" in md


def test_step_yields_one_token_each(lm):
    gen = decode_panel.step(lm, SETTINGS, None, PROMPT, 10, GREEDY)
    assert len(gen.events) == 1 and gen.events[0].forward_tokens == len(gen.prompt_ids)
    gen = decode_panel.step(lm, SETTINGS, gen, PROMPT, 10, GREEDY)
    assert len(gen.events) == 2 and gen.events[1].forward_tokens == 1


def test_play_gives_the_same_tokens_as_steps(lm):
    gen, done, ticks = None, False, 0
    while not done:
        gen, done = decode_panel.play_tick(lm, SETTINGS, gen, PROMPT, 12, GREEDY)
        ticks += 1
    reference = [e.token_id for e in stream(lm, prompt_ids(lm.tokenizer, PROMPT), max_new_tokens=12)]
    assert gen.generated == reference and ticks == len(reference)


def test_branch_continues_like_a_fresh_run(lm):
    gen = None
    for _ in range(5):
        gen = decode_panel.step(lm, SETTINGS, gen, PROMPT, 10, GREEDY)
    alt = gen.events[2].candidates[1].token_id
    gen = decode_panel.branch_to(lm, gen, 2, alt)
    assert gen.generated[2] == alt and len(gen.events) == 3
    while not gen.finished:
        gen = decode_panel.step(lm, SETTINGS, gen, PROMPT, 10, GREEDY)
    fresh = [e.token_id for e in stream(lm, gen.prompt_ids + gen.generated[:3], max_new_tokens=7)]
    assert gen.generated[3:] == fresh


def test_prompt_change_starts_over_and_reset_clears(lm):
    gen = decode_panel.step(lm, SETTINGS, None, PROMPT, 10, GREEDY)
    gen = decode_panel.step(lm, SETTINGS, gen, "A different prompt.", 10, GREEDY)
    assert len(gen.events) == 1
    out = decode_panel.views(lm, None, GREEDY)
    assert out[0] is None and "Press <b>Step</b>" in out[1]


def test_sampling_controls_reshape_the_distribution(lm):
    gen = decode_panel.step(lm, SETTINGS, None, PROMPT, 10, GREEDY)
    raw = [c.raw_probability for c in gen.events[-1].candidates]
    assert reshaped(gen, GREEDY) is None
    hot = reshaped(gen, SamplingSettings(temperature=2.0))
    cold = reshaped(gen, SamplingSettings(temperature=0.3))
    assert hot[0] < raw[0] < cold[0]  # flatter when hot, sharper when cold
    top2 = reshaped(gen, SamplingSettings(temperature=1.0, top_k=2))
    assert top2[2:] == [0.0] * (len(top2) - 2)
    assert sum(top2[:2]) == pytest.approx(1.0, abs=1e-5)


def test_sampled_steps_differ_from_greedy_with_seed(lm):
    hot = SamplingSettings(temperature=1.5, seed=3)
    a = decode_panel.step(lm, SETTINGS, None, PROMPT, 8, hot)
    assert "sampled" in a.events[0].chosen_by


def test_prefill_measurement_and_shared_sweep(lm):
    md = prefill_panel.measure_prompt(lm, SETTINGS, PROMPT)
    assert "one forward pass" in md and "decode step" in md
    shared = SharedResults()
    outs = list(prefill_panel.run_sweep(lm, shared, [4, 16, 64], 16))
    assert "Done." in outs[-1][1]
    fig = outs[-1][0]
    names = [t.name for t in fig.data]
    assert any("extrapolated" in n for n in names)  # 64 > 16: extrapolated, and labelled
    again = list(prefill_panel.run_sweep(lm, shared, [4, 16, 64], 16))
    assert len(again) == 1 and "shared result" in again[0][1]


def test_bad_prompt_gives_clear_error(lm):
    with pytest.raises(InferenceInputError, match="empty"):
        decode_panel.step(lm, SETTINGS, None, "   ", 10, GREEDY)


def test_stop_is_final_for_queued_play_ticks(lm):
    gen, _ = decode_panel.play_tick(lm, SETTINGS, None, PROMPT, 10, GREEDY)
    gen.stopped = True
    after, done = decode_panel.play_tick(lm, SETTINGS, gen, PROMPT, 10, GREEDY)
    assert done and after is gen and len(after.events) == 1 and after.finished == "stopped by you"


def test_cost_estimate_refuses_huge_text(tok):
    with pytest.raises(InferenceInputError, match="characters"):
        tokens_panel.cost_md(tok, "x" * 30_000, 10, 1.0, 1.0, max_chars=20_000)


def test_roofline_panel_measures_and_explains(lm):
    from lessons import performance_panel

    r = performance_panel.measure_roofline(lm, new_tokens=6)
    assert r.bandwidth_gbs > 0 and r.measured_tokens_per_s > 0
    assert r.bytes_per_token > lm.info.weight_bytes  # weights plus the cache
    assert abs(r.ceiling_tokens_per_s - r.bandwidth_gbs * 1e9 / r.bytes_per_token) < 1e-9
    md = performance_panel.roofline_markdown(r, lm.info)
    assert f"{r.fraction:.0%}" in md and "theoretical" in md and "measured" in md


def test_stop_during_a_running_step_discards_that_step(lm, monkeypatch):
    gen, _ = decode_panel.play_tick(lm, SETTINGS, None, PROMPT, 10, GREEDY)
    real_step = decode_panel.step

    def step_while_stop_is_pressed(*args, **kwargs):
        g = real_step(*args, **kwargs)
        g.stopped = True  # Stop arrives while the forward pass runs
        return g

    monkeypatch.setattr(decode_panel, "step", step_while_stop_is_pressed)
    after, done = decode_panel.play_tick(lm, SETTINGS, gen, PROMPT, 10, GREEDY)
    assert done and len(after.events) == 1 and len(after.generated) == 1


def test_stop_keeps_exactly_the_tokens_on_screen(lm):
    gen = None
    for _ in range(4):
        gen = decode_panel.step(lm, SETTINGS, gen, PROMPT, 10, GREEDY)
    decode_panel.stop(gen, 3)  # the 4th token was computed but not yet drawn
    assert gen.finished == "stopped by you" and len(gen.events) == 3 and len(gen.generated) == 3
    decode_panel.stop(gen, 7)  # more than exist: nothing to drop
    assert len(gen.events) == 3
