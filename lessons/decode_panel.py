"""Lesson 3 panel: decode one token at a time: Step, Play/Pause, Stop, Reset, Branch,
with the candidates and the per-token timing drawn after every step.

Play is a `gr.Timer` that presses Step for you: each tick is one short event, so a whole
classroom playing at once shares the model fairly and Pause is instant."""
from __future__ import annotations

import gradio as gr

from inference.config import Settings
from inference.generation import (Generation, branch, continue_branch, next_token, reshaped,
                                  set_sampling, start)
from inference.sampling import SamplingSettings
from inference.tokens import prompt_ids
from visualizations.decode_view import decode_stats_md, output_html
from visualizations.style import machine_caption
from visualizations.timing_charts import candidates_figure, decode_latency_figure

from .feedback import user_error
from .lesson_text import lesson_text


def sampling_from(temperature, top_k, top_p, seed) -> SamplingSettings:
    return SamplingSettings(temperature=float(temperature or 0), top_k=int(top_k or 0),
                            top_p=float(top_p if top_p is not None else 1.0),
                            seed=int(seed) if seed is not None else 0)


def views(lm, gen: Generation | None, sampling: SamplingSettings, at_step: int | None = None):
    """Everything the panel shows for this state: (state, html, stats, candidates, timing,
    branch-step slider update, branch-choice dropdown update, number of tokens shown)."""
    info = lm.info
    cap = machine_caption(info.device, info.dtype, info.threads)
    events = gen.events if gen else []
    at = len(events) - 1 if at_step is None else max(0, min(int(at_step), len(events) - 1))
    ev = events[at] if events else None
    shaped = reshaped(gen, sampling) if gen is not None and at == len(events) - 1 else None
    cand = candidates_figure(ev.candidates if ev else [], ev.token_id if ev else None, shaped, cap)
    timing = decode_latency_figure([e.seconds for e in events], cap)
    choices = [(f"{c.piece!r}  ({c.raw_probability:.1%})", c.token_id) for c in ev.candidates] if ev else []
    pick = next((c.token_id for c in ev.candidates if c.token_id != ev.token_id), None) if ev else None
    return (gen, output_html(events), decode_stats_md(events, gen.finished if gen else None),
            cand, timing,
            gr.update(maximum=max(len(events) - 1, 1), value=max(at, 0), interactive=bool(events)),
            gr.update(choices=choices, value=pick), len(events))


def stop(gen: Generation | None, tokens_shown: int | None) -> None:
    """Stop for good, keeping exactly the tokens the learner saw when pressing Stop: a token
    computed just before (its display still on the way) is dropped with the rest."""
    if gen is None:
        return
    gen.stopped = True
    if tokens_shown is not None and 0 <= int(tokens_shown) < len(gen.events):
        del gen.events[int(tokens_shown):], gen.generated[int(tokens_shown):]


def step(lm, settings: Settings, gen: Generation | None, prompt: str, max_new: int,
         sampling: SamplingSettings) -> Generation:
    """One Step: start a generation if there is none (or the prompt changed), then one token."""
    ids = prompt_ids(lm.tokenizer, prompt, max_chars=settings.max_prompt_chars,
                     max_tokens=settings.max_prompt_tokens)
    if gen is None or gen.prompt_ids != ids or gen.finished:
        gen = start(lm, ids, sampling, int(max_new), top_k_shown=settings.top_k_shown,
                    max_new_limit=settings.max_new_tokens)
    else:
        gen.max_new_tokens = max(len(gen.generated) + 1, min(int(max_new), settings.max_new_tokens))
        if gen.sampling != sampling:
            set_sampling(lm, gen, sampling)
    if gen.pending_force is not None:
        continue_branch(lm, gen)
    else:
        next_token(lm, gen)
    return gen


def play_tick(lm, settings: Settings, gen: Generation | None, prompt: str, max_new: int,
              sampling: SamplingSettings) -> tuple[Generation, bool]:
    """What one tick of Play does: a Step, then whether Play should stop (finished).

    A tick that was already queued when the learner pressed Stop does nothing."""
    if gen is not None and gen.stopped:
        return gen, True
    before = len(gen.events) if gen is not None else 0
    gen = step(lm, settings, gen, prompt, max_new, sampling)
    if gen.stopped:  # Stop was pressed while this step ran: the step does not count
        del gen.events[before:], gen.generated[before:]
        return gen, True
    return gen, gen.finished is not None


def branch_to(lm, gen: Generation | None, at_step: int, token_id: int | None) -> Generation:
    """Rewind to `at_step`, pick `token_id` there, and take that step."""
    if gen is None or not gen.events:
        raise gr.Error("Generate a few tokens first, then branch from one of them.")
    if token_id is None:
        raise gr.Error("Choose a candidate token to branch with.")
    branch(gen, int(at_step), int(token_id))
    continue_branch(lm, gen)
    return gen


def build(lm, settings: Settings, shared=None) -> None:
    gr.Markdown(lesson_text("lesson3_decode.md"))
    state = gr.State(None)
    with gr.Row():
        prompt = gr.Textbox(label="Prompt", lines=2, scale=3, max_length=settings.max_prompt_chars,
                            value="Write one sentence about the moon.", elem_id="decode-prompt")
        max_new = gr.Slider(1, settings.max_new_tokens, value=settings.default_new_tokens, step=1,
                            label="Max new tokens", scale=1)
    with gr.Row():
        temperature = gr.Slider(0, 2, value=0, step=0.05, label="Temperature (0 = greedy)",
                                elem_id="decode-temperature")
        top_k = gr.Slider(0, 200, value=0, step=1, label="Top-k (0 = off)")
        top_p = gr.Slider(0.05, 1, value=1, step=0.01, label="Top-p (1 = off)")
        seed = gr.Number(value=0, precision=0, label="Seed", minimum=0, maximum=2**31 - 1)
    with gr.Row():
        step_btn = gr.Button("Step ▶|", variant="primary", elem_id="decode-step")
        play_btn = gr.Button("Play ▶", elem_id="decode-play")
        pause_btn = gr.Button("Pause ⏸", elem_id="decode-pause")
        stop_btn = gr.Button("Stop ⏹", variant="stop", elem_id="decode-stop")
        reset_btn = gr.Button("Reset ↺", elem_id="decode-reset")
        speed = gr.Slider(0.05, 2, value=0.3, step=0.05, label="Play: pause between steps (s)")
    timer = gr.Timer(0.3, active=False)
    stats = gr.Markdown(decode_stats_md([], None), elem_id="decode-stats")
    text = gr.HTML(output_html([]), elem_id="decode-output")
    with gr.Row():
        cand_plot = gr.Plot(label="Candidates", elem_id="decode-candidates")
        timing_plot = gr.Plot(label="Timing", elem_id="decode-timing")
    with gr.Row():
        at_step = gr.Slider(0, 1, value=0, step=1, label="Branch: look at step", interactive=False,
                            elem_id="decode-branch-step")
        choice = gr.Dropdown([], label="…and continue with this candidate instead",
                             elem_id="decode-branch-choice")
        branch_btn = gr.Button("Branch here ↳", elem_id="decode-branch")
    shown = gr.Number(0, visible=False)  # tokens on the learner's screen, sent back with Stop
    outs = [state, text, stats, cand_plot, timing_plot, at_step, choice, shown]
    controls = [step_btn, branch_btn, play_btn]

    def on_step(g, p, m, t, k, tp, s):
        try:
            sampling = sampling_from(t, k, tp, s)
            return views(lm, step(lm, settings, g, p, m, sampling), sampling)
        except gr.Error:
            raise
        except Exception as exc:
            raise user_error(exc) from exc

    def on_tick(g, p, m, t, k, tp, s):
        try:
            sampling = sampling_from(t, k, tp, s)
            g, done = play_tick(lm, settings, g, p, m, sampling)
            out = views(lm, g, sampling)
        except Exception as exc:
            raise user_error(exc) from exc
        return out + ((gr.Timer(active=False),) + tuple(gr.update(interactive=True) for _ in controls)
                      if done else (gr.Timer(),) + tuple(gr.update() for _ in controls))

    def on_play(g, interval):
        # Play after a finished or stopped run starts a new one, on purpose.
        fresh = None if g is not None and g.finished else g
        return (gr.Timer(value=float(interval), active=True),) + tuple(
            gr.update(interactive=False) for _ in controls) + (fresh,)

    def on_pause():
        return (gr.Timer(active=False),) + tuple(gr.update(interactive=True) for _ in controls)

    def on_stop(g, shown, t, k, tp, s):
        stop(g, shown)
        return on_pause() + views(lm, g, sampling_from(t, k, tp, s))

    def on_reset(t, k, tp, s):
        return on_pause() + views(lm, None, sampling_from(t, k, tp, s))

    def on_sampling(g, t, k, tp, s):
        try:
            return views(lm, g, sampling_from(t, k, tp, s))
        except Exception as exc:
            raise user_error(exc) from exc

    def on_look(g, at, t, k, tp, s):
        v = views(lm, g, sampling_from(t, k, tp, s), at_step=at)
        return v[3], v[4], v[6]

    def on_branch(g, at, c, t, k, tp, s):
        try:
            return views(lm, branch_to(lm, g, at, c), sampling_from(t, k, tp, s))
        except gr.Error:
            raise
        except Exception as exc:
            raise user_error(exc) from exc

    ins = [state, prompt, max_new, temperature, top_k, top_p, seed]
    samp = [temperature, top_k, top_p, seed]
    step_btn.click(on_step, ins, outs, concurrency_id="model", time_limit=60,
                   api_name="decode_step")
    timer.tick(on_tick, ins, outs + [timer] + controls, concurrency_id="model", time_limit=60,
               trigger_mode="once", show_progress="hidden", api_name="decode_play_tick")
    play_btn.click(on_play, [state, speed], [timer] + controls + [state], api_name="decode_play")
    pause_btn.click(on_pause, None, [timer] + controls, api_name="decode_pause")
    stop_btn.click(on_stop, [state, shown] + samp, [timer] + controls + outs, api_name="decode_stop")
    reset_btn.click(on_reset, samp, [timer] + controls + outs, api_name="decode_reset")
    for s in (temperature, top_k, top_p):
        s.release(on_sampling, [state] + samp, outs, show_progress="hidden",
                  api_name="decode_sampling")
    at_step.release(on_look, [state, at_step] + samp, [cand_plot, timing_plot, choice],
                    show_progress="hidden", api_name="decode_look")
    branch_btn.click(on_branch, [state, at_step, choice] + samp, outs, concurrency_id="model",
                     time_limit=60, api_name="decode_branch")
