"""Lessons 1-3 and 'This machine': the panels' plain functions on the real model, and the
panels' controls built from `Settings`."""
import asyncio
import threading

import gradio as gr
import pytest

from inference.config import Settings
from inference.errors import (
    InferenceInputError,
    NotReadyError,
    PromptTooLongError,
    SettingOutOfRangeError,
)
from inference.experiments import prefill_sweep, roofline
from inference.experiments.roofline import machine_bandwidth
from inference.experiments.serving_cost import templated_conversation_costs
from inference.experiments.shared_results import SharedResults
from inference.generation import reshaped, stream
from inference.sampling import SamplingSettings
from inference.tokens import prompt_ids
from lessons import (
    batching_handlers,
    chat_handlers,
    chat_panel,
    decode_handlers,
    decode_panel,
    machine_handlers,
    machine_panel,
    prefill_handlers,
    prefill_panel,
    quantization_panel,
    tokens_handlers,
    tokens_panel,
)
from lessons.common.context import AppContext
from polling import wait_for, without_ticks
from test_settings import limit_name
from visualizations.noise_view import BUSY
from visualizations.step_charts import roofline_md
from visualizations.timing_text import prefill_report_md

SETTINGS = Settings()
PROMPT = "Write one sentence about the moon."
GREEDY = SamplingSettings()


def steps(lm, n: int, max_new: int = 10, sampling: SamplingSettings = GREEDY):
    """A generation after `n` Steps."""
    gen = None
    for _ in range(n):
        gen = decode_handlers.step(lm, SETTINGS, gen, PROMPT, max_new, sampling)
    return gen


def run_to_end(lm, max_new: int, sampling: SamplingSettings):
    gen = decode_handlers.step(lm, SETTINGS, None, PROMPT, max_new, sampling)
    while not gen.finished:
        gen = decode_handlers.step(lm, SETTINGS, gen, PROMPT, max_new, sampling)
    return gen


def test_tokens_view_counts_and_template(tok):
    html, counts, note = tokens_handlers.show_tokens(tok, "Hello world", False, 1000)
    assert "<sub>19556</sub>" in html and "**2** tokens" in counts
    wrapped = tokens_handlers.show_tokens(tok, "Hello world", True, 1000)
    assert "&lt;|im_start|&gt;" in wrapped.html and "special" in wrapped.html
    assert "your 2 tokens become" in wrapped.note
    with pytest.raises(PromptTooLongError, match="characters"):
        tokens_handlers.show_tokens(tok, "x" * 2000, False, 1000)


def test_cost_estimate_arithmetic(tok):
    md = tokens_handlers.cost_md(tok, "Hello world", 1000, 2.0, 10.0)
    n_in = len(prompt_ids(tok, "Hello world"))
    assert f"**{n_in:,} input tokens**" in md
    assert f"${1000 * 10.0 / 1e6 + n_in * 2.0 / 1e6:.6f}" in md


def test_a_conversation_resends_its_history_every_turn(tok):
    """The input a chat sends grows every turn; the table shows it and its bill."""
    rows = templated_conversation_costs(tok, "Hello world", 20, 3, 1.0, 2.0)
    assert all(b.input_tokens > a.input_tokens + 20 for a, b in zip(rows, rows[1:]))  # resent
    assert rows[-1].total == pytest.approx(sum((r.input_tokens * 1 + 20 * 2) / 1e6 for r in rows))
    md = tokens_handlers.conversation_md(tok, "Hello world", 50, 1.0, 2.0, 4)
    n_in = len(prompt_ids(tok, "Hello world"))
    turn4 = templated_conversation_costs(tok, "Hello world", 50, 4, 1.0, 2.0)[3].input_tokens
    assert f"| 1 | {n_in:,} | 50 |" in md and f"| 4 | {turn4:,} | 50 |" in md
    assert turn4 < 4 * n_in + 3 * 50  # not the old table's k copies of a one-turn prompt
    assert "By turn 4 one request sends" in md
    with pytest.raises(SettingOutOfRangeError, match="Turns"):
        tokens_handlers.conversation_md(tok, "hi", 10, 1.0, 1.0,
                                        SETTINGS.conversation_turns.high + 1)


def test_cost_estimate_refuses_huge_text_and_prices_out_of_range(tok):
    with pytest.raises(InferenceInputError, match="characters"):
        tokens_handlers.cost_md(tok, "x" * 30_000, 10, 1.0, 1.0, max_chars=20_000)
    with pytest.raises(SettingOutOfRangeError, match="price"):
        tokens_handlers.cost_md(tok, "hi", 10, SETTINGS.token_price_per_m.high + 1, 1.0)


EVERY_TOKEN = Settings(chat_frames_per_s=1e9)  # a frame per token, however fast the steps


def chat_frames(lm, serving, prompt: str, max_new: int, settings: Settings = SETTINGS) -> list:
    """Every frame of Try it's chat (an async generator, as Gradio runs it on its loop)."""
    async def collect() -> list:
        return [f async for f in chat_handlers.generate_chat(lm, settings, serving, prompt,
                                                             max_new)]
    return asyncio.run(collect())


def test_chat_streams_the_greedy_answer_through_the_server(lm, serving):
    frames = without_ticks(chat_frames(lm, serving, PROMPT, 6, EVERY_TOKEN))
    reference = list(stream(lm, prompt_ids(lm.tokenizer, PROMPT), max_new_tokens=6))
    assert len(frames) == len(reference) + 1  # first: waiting for a row
    assert frames[0].history[1]["content"] == "" and "batch" in frames[0].stats
    last = frames[-1]
    assert last.history[0] == {"role": "user", "content": PROMPT}
    assert last.history[1]["content"] == reference[-1].text
    assert "time to first token" in last.stats
    assert "prompt tokens computed in" in last.stats  # what its prefill did, from its record
    assert f"{len(reference)} tokens generated" in last.stats
    assert "continuous batcher" in last.stats
    if reference[-1].finished == "max tokens":
        assert "stopped at your limit of **6 new tokens**" in last.stats


def test_a_chat_shows_its_first_and_last_tokens_at_once_and_paces_the_rest(lm, serving):
    """`chat_frames_per_s` paces the screen updates of all chats together. However
    slow the pace, the first token and the finished answer show at once; the text between
    waits for its frame but is never lost (the last frame holds the whole answer)."""
    reference = list(stream(lm, prompt_ids(lm.tokenizer, PROMPT), max_new_tokens=12))
    # a frame every ~10^6 s of a one-row step; and no idle tick, which draws the text waiting
    # for its frame when a step outlasts `stop_check_s` (as on a loaded machine: rightly shown)
    slow = Settings(chat_frames_per_s=1e-6, stop_check_s=600.0)
    frames = without_ticks(chat_frames(lm, serving, PROMPT, 12, slow))
    waiting, first, last = frames
    assert waiting.history[1]["content"] == ""
    assert first.history[1]["content"] == reference[0].text  # the first token, at once
    assert last.history[1]["content"] == reference[-1].text.replace(lm.tokenizer.eos_token, "")
    assert f"{len(reference)} tokens generated" in last.stats


def test_a_class_of_chats_waits_on_the_loop_not_in_threads(lm, serving):
    """Eight chats at once on one event loop, as the web server runs them: each gets
    its solo greedy answer, and no thread is started to wait for their tokens (thirty waiting
    threads woke after every step, taking Python's lock from the step's arithmetic)."""
    prompts = [f"Name {n} animals." for n in range(2, 10)]
    threads_before = threading.active_count()
    seen_threads: list[int] = []

    async def one(prompt: str) -> str:
        last = None
        async for frame in chat_handlers.generate_chat(lm, SETTINGS, serving, prompt, 8):
            seen_threads.append(threading.active_count())
            last = frame
        return last.history[1]["content"]

    async def all_at_once() -> list[str]:
        return await asyncio.gather(*(one(p) for p in prompts))

    answers = asyncio.run(all_at_once())
    for prompt, answer in zip(prompts, answers, strict=True):
        solo = list(stream(lm, prompt_ids(lm.tokenizer, prompt), max_new_tokens=8))
        assert answer == solo[-1].text.replace(lm.tokenizer.eos_token, ""), prompt
    assert seen_threads and max(seen_threads) == threads_before, (threads_before, seen_threads)


def test_stop_lands_while_the_server_is_held(lm, serving):
    """A Stop must not wait for the next token: while the server runs no step (here held; in
    class a long step or a full batch), the chat re-yields its frame every `stop_check_s`, and
    closing it there (what Gradio does on Stop) cancels the request before it is ever run."""
    async def held_then_stopped(steps: int) -> None:
        chat = chat_handlers.generate_chat(lm, SETTINGS, serving, PROMPT, 200)
        waiting = await chat.__anext__()
        assert waiting.history[1]["content"] == ""
        for _ in range(2):  # ticks, no token in between (a blocked handler fails here)
            tick = await asyncio.wait_for(chat.__anext__(), 30 * SETTINGS.stop_check_s)
            assert tick is waiting
        assert serving.stats().queued == 1
        await chat.aclose()  # Stop

    with serving.turns.exclusive():
        steps = serving.stats().steps
        asyncio.run(held_then_stopped(steps))
    assert wait_for(lambda: serving.stats().queued == 0)
    assert serving.stats().steps == steps and serving.stats().active == 0  # never ran


def test_stop_cancels_a_chat_waiting_for_its_token(lm, serving):
    """Gradio stops an async handler by cancelling its task mid-wait: the request is cancelled
    then and there, and the server never runs it."""
    async def cancelled_mid_wait() -> None:
        async def consume() -> None:
            async for _ in chat_handlers.generate_chat(lm, SETTINGS, serving, PROMPT, 200):
                pass
        task = asyncio.ensure_future(consume())
        while serving.stats().queued == 0:  # submitted, waiting for the held server
            await asyncio.sleep(0.01)  # lets the task run to its first wait
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with serving.turns.exclusive():
        steps = serving.stats().steps
        asyncio.run(cancelled_mid_wait())
    assert wait_for(lambda: serving.stats().queued == 0)
    assert serving.stats().steps == steps and serving.stats().active == 0  # never ran


def test_chat_echoes_a_surrogate_prompt_cleanly(lm, serving):
    frames = chat_frames(lm, serving, "Say hi \ud800", 3)
    assert frames[-1].history[0]["content"].encode("utf-8")  # encodable: no lone surrogate
    assert len(frames) >= 2 and frames[-1].history[1]["content"]


def test_step_yields_one_token_each(lm):
    gen = steps(lm, 1)
    assert len(gen.events) == 1 and gen.events[0].forward_tokens == len(gen.prompt_ids)
    gen = decode_handlers.step(lm, SETTINGS, gen, PROMPT, 10, GREEDY)
    assert len(gen.events) == 2 and gen.events[1].forward_tokens == 1
    view = decode_handlers.views(lm, gen, GREEDY)
    assert view.gen is gen and view.tokens == 2 and view.look_at == 1
    assert [c for _, c in view.choices] == [c.token_id for c in gen.events[1].candidates]
    assert view.pick is not None and view.pick != gen.events[1].token_id
    assert "Tokens:** 2" in view.stats_md


def test_play_gives_the_same_tokens_as_steps(lm):
    gen, done, ticks = None, False, 0
    while not done:
        gen, done = decode_handlers.play_tick(lm, SETTINGS, gen, PROMPT, 12, GREEDY)
        ticks += 1
    ids = prompt_ids(lm.tokenizer, PROMPT)
    reference = [e.token_id for e in stream(lm, ids, max_new_tokens=12)]
    assert gen.generated == reference and ticks == len(reference)


def test_branch_continues_like_a_fresh_run(lm):
    gen = steps(lm, 5)
    alt = gen.events[2].candidates[1].token_id
    gen = decode_handlers.branch_to(lm, gen, 2, alt)
    assert gen.generated[2] == alt and len(gen.events) == 3
    while not gen.finished:
        gen = decode_handlers.step(lm, SETTINGS, gen, PROMPT, 10, GREEDY)
    fresh = [e.token_id for e in stream(lm, gen.prompt_ids + gen.generated[:3], max_new_tokens=7)]
    assert gen.generated[3:] == fresh


def test_branch_needs_tokens_and_a_candidate_first(lm):
    with pytest.raises(NotReadyError, match="Generate a few tokens first"):
        decode_handlers.branch_to(lm, None, 0, 5)
    gen = steps(lm, 2)
    with pytest.raises(NotReadyError, match="Choose a candidate"):
        decode_handlers.branch_to(lm, gen, 1, None)
    with pytest.raises(SettingOutOfRangeError, match="no step 9"):
        decode_handlers.branch_to(lm, gen, 9, gen.events[0].candidates[1].token_id)
    assert len(gen.events) == 2  # a refused branch leaves the run as it was


def test_prompt_change_starts_over_and_reset_clears(lm):
    gen = steps(lm, 1)
    gen = decode_handlers.step(lm, SETTINGS, gen, "A different prompt.", 10, GREEDY)
    assert len(gen.events) == 1
    view = decode_handlers.views(lm, None, GREEDY)
    assert view.gen is None and "Press <b>Step</b>" in view.text_html
    assert view.tokens == 0 and view.choices == [] and view.pick is None


def test_sampling_controls_reshape_the_distribution(lm):
    gen = steps(lm, 1)
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
    sampled, again = run_to_end(lm, 8, hot), run_to_end(lm, 8, hot)
    greedy = [e.token_id for e in stream(lm, prompt_ids(lm.tokenizer, PROMPT), max_new_tokens=8)]
    assert all("sampled" in e.chosen_by for e in sampled.events)
    assert sampled.generated != greedy  # sampling chose other tokens than greedy
    assert again.generated == sampled.generated  # the same seed repeats the same choices


def test_bad_prompt_gives_clear_error(lm):
    with pytest.raises(InferenceInputError, match="empty"):
        decode_handlers.step(lm, SETTINGS, None, "   ", 10, GREEDY)


def test_stop_is_final_for_queued_play_ticks(lm):
    gen, _ = decode_handlers.play_tick(lm, SETTINGS, None, PROMPT, 10, GREEDY)
    gen.stop()
    after, done = decode_handlers.play_tick(lm, SETTINGS, gen, PROMPT, 10, GREEDY)
    assert done and after is gen and len(after.events) == 1 and after.finished == "stopped by you"


def test_stop_during_a_running_step_discards_that_step(lm, monkeypatch):
    gen, _ = decode_handlers.play_tick(lm, SETTINGS, None, PROMPT, 10, GREEDY)
    real_step = decode_handlers.step

    def step_while_stop_is_pressed(*args, **kwargs):
        g = real_step(*args, **kwargs)
        g.stop()  # Stop arrives while the forward pass runs
        return g

    monkeypatch.setattr(decode_handlers, "step", step_while_stop_is_pressed)
    after, done = decode_handlers.play_tick(lm, SETTINGS, gen, PROMPT, 10, GREEDY)
    assert done and len(after.events) == 1 and len(after.generated) == 1


def test_stop_keeps_exactly_the_tokens_on_screen(lm):
    gen = steps(lm, 4)
    first_three = gen.generated[:3]
    decode_handlers.stop(gen, 3)  # the 4th token was computed but not yet drawn
    assert gen.finished == "stopped by you" and gen.generated == first_three
    assert len(gen.events) == 3
    decode_handlers.stop(gen, 7)  # more than exist: nothing to drop
    decode_handlers.stop(gen, None)
    assert len(gen.events) == 3 and gen.generated == first_three


def test_stop_waits_for_the_view_in_flight_so_its_view_is_the_newest(lm):
    """A Play tick drawing its view when Stop arrives: Stop waits for it, so the tick's view
    (not stopped) is never the later one on the learner's screen."""
    gen = steps(lm, 3)
    stopper = threading.Thread(target=decode_handlers.stop, args=(gen, 2))
    with gen.lock:  # the tick's step and view hold the generation
        stopper.start()
        stopper.join(timeout=0.5)
        assert stopper.is_alive(), "Stop changed the generation under a step in flight"
        assert not gen.stopped and len(gen.events) == 3
    stopper.join(timeout=30)
    assert not stopper.is_alive()
    view = decode_handlers.views(lm, gen, GREEDY)
    assert view.tokens == 2 and "stopped by you" in view.stats_md


def test_prefill_measurement_and_shared_sweep(lm):
    m = prefill_handlers.measure_text(lm, SETTINGS, PROMPT)
    assert m.prompt_tokens == len(prompt_ids(lm.tokenizer, PROMPT))
    assert 0 < m.prefill_seconds <= m.ttft_seconds
    assert m.decode_steps == prefill_sweep.DECODE_STEPS and m.decode_step_seconds > 0
    md = prefill_report_md(m)
    assert "one forward pass" in md and "decode step" in md
    assert f"**{m.prompt_tokens} tokens**" in md
    shared = SharedResults()
    frames = list(prefill_handlers.run_prefill_sweep(lm, SETTINGS, shared, [4, 16, 64], 16))
    assert "Done. At 16 tokens (measured both ways)" in frames[-1].progress
    names = [t.name for t in frames[-1].chart.data]
    assert any("extrapolated" in n for n in names)  # 64 > 16: extrapolated, and labelled
    assert list(frames[-1].chart.data[0].x) == [4, 16, 64]
    again = list(prefill_handlers.run_prefill_sweep(lm, SETTINGS, shared, [4, 16, 64], 16))
    if BUSY.capitalize() in frames[-1].progress:  # judged busy (noise.py): measured again
        assert len(again) > 1 and "shared result" not in again[-1].progress
    else:
        assert len(again) == 1 and "shared result" in again[0].progress
    with pytest.raises(SettingOutOfRangeError):
        list(prefill_handlers.run_prefill_sweep(lm, SETTINGS, shared, [4],
                                        SETTINGS.prefill_sweep_tokens.high + 1))


def test_roofline_panel_measures_and_explains(lm):
    r = roofline.watched_roofline(lm, new_tokens=6).roofline
    assert r.bandwidth_gbs > 0 and r.measured_tokens_per_s > 0
    assert r.bytes_per_token > lm.info.weight_bytes  # weights plus the cache
    assert abs(r.ceiling_tokens_per_s - r.bandwidth_gbs * 1e9 / r.bytes_per_token) < 1e-9
    md = roofline_md(r, lm.info.weight_bytes)
    assert f"{r.fraction:.0%}" in md and "theoretical" in md and "measured" in md
    point = machine_handlers.roofline_point(lm, r)
    assert point.decode_tokens_per_s == r.measured_tokens_per_s
    assert point.bytes_per_token == r.bytes_per_token


BRANCH_STEP = "decode-branch-step"  # bounded by the tokens generated so far, not by Settings


def test_one_bandwidth_figure_for_the_machine(lm):
    """The roofline, the batch sweep and the quantization lesson quote one measured bandwidth
    (three separate measurements once showed 15.1, 18.5 and 20.3 GB/s on one screen)."""
    shared = SharedResults()
    r = roofline.watched_roofline(lm, new_tokens=2, shared=shared).roofline
    again = roofline.watched_roofline(lm, new_tokens=2, shared=shared).roofline
    assert again.bandwidth_gbs == r.bandwidth_gbs == machine_bandwidth(shared, lm.device)
    done = list(batching_handlers.sweep_frames(lm, SETTINGS, shared, max_batch=1, steps=2,
                                               budget_mb=None))[-1]
    floor = [t.name for t in done.step_time.data if "GB/s" in (t.name or "")]
    assert floor and f"{r.bandwidth_gbs:.1f} GB/s" in floor[0], floor


def test_every_slider_and_bounded_number_comes_from_settings(lm, serving):
    with gr.Blocks() as demo:
        ctx = AppContext(lm, SETTINGS, SharedResults(), serving, demo)
        for panel in (chat_panel, tokens_panel, prefill_panel, decode_panel, quantization_panel,
                      machine_panel):
            panel.build(ctx)
    sliders = [b for b in demo.blocks.values() if isinstance(b, gr.Slider)]
    numbers = [b for b in demo.blocks.values() if isinstance(b, gr.Number)
               and (b.minimum is not None or b.maximum is not None)]
    assert len(sliders) >= 9 and len(numbers) >= 4
    ranges = SETTINGS.ranges()
    for control in sliders + numbers:
        if control.elem_id == BRANCH_STEP:
            continue
        name = limit_name(control)
        assert name in ranges, (control.label, name)
        low, high = (control.minimum, control.maximum)
        assert (low, high) == (ranges[name].low, ranges[name].high), control.label


def test_conversation_turns_count_the_system_message_once(tok):
    """Turn k's input is what the real chat template sends for k questions
    and k - 1 answers (the system message once), not k copies of a one-turn prompt."""
    from inference.experiments.serving_cost import templated_conversation_costs
    from inference.tokens import encode_text, tokenize_chat

    q = "Why is the sky blue?"
    rows = templated_conversation_costs(tok, q, 300, 8, 1.0, 2.0)
    one_turn = len(tokenize_chat(tok, q).tokens)
    assert rows[0].input_tokens == one_turn  # turn 1 is exactly the one-turn prompt
    # turn 8 by the template: the 8 questions, 7 answers and their markers, built for real
    messages = []
    for _ in range(7):
        messages += [{"role": "user", "content": q}, {"role": "assistant", "content": "x"}]
    messages += [{"role": "user", "content": q}]
    real = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    real_tokens = len(tok(real, add_special_tokens=False)["input_ids"])
    x = len(encode_text(tok, "x"))
    assert rows[7].input_tokens == pytest.approx(real_tokens + 7 * (300 - x), abs=8)
    assert rows[7].input_tokens < 8 * one_turn + 7 * 300  # the old table's overcount
    assert rows[7].total == pytest.approx(sum(r.cost for r in rows))
