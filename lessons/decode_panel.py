"""Lesson 3 panel: decode one token at a time (Step, Play/Pause, Stop, Reset, Branch). Play is a
`gr.Timer` pressing Step, one short event per tick, so a class playing at once shares the model.
`DecodeUI` creates inputs in the order the named endpoints take them (Gradio orders sets so)."""
from __future__ import annotations

import gradio as gr

from inference.config import Settings
from inference.sampling import SamplingSettings
from visualizations.mechanism import decode_diagram
from visualizations.timing_charts import candidates_figure, decode_latency_figure
from visualizations.token_view import CACHE_FREED, decode_stats_md, output_html

from .common.context import AppContext
from .common.controls import number, prompt_box, slider
from .common.feedback import guarded
from .decode_handlers import DecodeView, branch_to, play_tick, step, stop, views


class DecodeUI:
    def __init__(self, settings: Settings, budget=None, layers: int = 1) -> None:
        # the learner's Generation: dropped when the tab closes or idles; the server's memory
        # budget may free its cache before
        self.state = gr.State(None, time_to_live=settings.state_ttl_s,
                              delete_callback=budget.forget if budget is not None else None)
        self.shown = gr.Number(0, visible=False)  # tokens on the learner's screen, for Stop
        with gr.Row():
            self.prompt = prompt_box(settings, "Write one sentence about the moon.",
                                     "decode-prompt", scale=3)
            self.max_new = slider(settings, "new_tokens", "Max new tokens", scale=1)
        with gr.Row():
            self.temperature = slider(settings, "temperature", "Temperature (0 = greedy)",
                                      elem_id="decode-temperature")
            self.top_k = slider(settings, "top_k", "Top-k (0 = off)")
            self.top_p = slider(settings, "top_p", "Top-p (1 = off)")
            self.seed = number(settings, "seed", "Seed")
            self.speed = slider(settings, "play_interval_s", "Play: pause between steps (s)")
        with gr.Row():  # buttons alone in their row: it stays one line high
            self.step_btn = gr.Button("Step ▶|", variant="primary", elem_id="decode-step")
            self.play_btn = gr.Button("Play ▶", elem_id="decode-play")
            self.pause_btn = gr.Button("Pause ⏸", elem_id="decode-pause")
            self.stop_btn = gr.Button("Stop ⏹", variant="stop", elem_id="decode-stop")
            self.reset_btn = gr.Button("Reset ↺", elem_id="decode-reset")
        self.timer = gr.Timer(settings.play_interval_s.default, active=False)
        # the charts under the buttons: Step and both fit a 1280×720 screen; the growing text
        # follows (a phone shows it first: assets/style.css)
        with gr.Column(elem_id="decode-results"):
            self.stats = gr.Markdown(decode_stats_md([], None), elem_id="decode-stats")
            with gr.Row():
                self.candidates = gr.Plot(candidates_figure([], None, None), label="Candidates",
                                          elem_id="decode-candidates")
                self.timing = gr.Plot(decode_latency_figure([], ""), label="Timing",
                                      elem_id="decode-timing")
            self.text = gr.HTML(output_html([]), elem_id="decode-output")
        with gr.Row():  # the step slider is bounded by the tokens so far, not by Settings
            self.at_step = gr.Slider(0, 1, value=0, step=1, label="Branch: look at step",
                                     interactive=False, elem_id="decode-branch-step")
            self.choice = gr.Dropdown([], label="…and continue with this candidate instead",
                                      elem_id="decode-branch-choice")
            self.branch_btn = gr.Button("Branch here ↳", elem_id="decode-branch")
        self.diagram = gr.HTML(decode_diagram([], [], layers), elem_id="decode-diagram")
        # whether Play is on, kept on the server: a tick sent just before Pause takes no step
        self.play_on = gr.State(False)
        self.sampling_inputs = {self.temperature, self.top_k, self.top_p, self.seed}
        self.view_outputs = [self.state, self.text, self.stats, self.candidates, self.timing,
                             self.at_step, self.choice, self.shown, self.diagram]
        self.play_outputs = [self.timer, self.step_btn, self.branch_btn, self.play_btn,
                             self.play_on]

    def sampling(self, data: dict) -> SamplingSettings:
        """The sampling controls as settings (empty boxes read as their 'off' values)."""
        top_p, seed = data[self.top_p], data[self.seed]
        return SamplingSettings(temperature=float(data[self.temperature] or 0),
                                top_k=int(data[self.top_k] or 0),
                                top_p=float(top_p if top_p is not None else 1.0),
                                seed=int(seed) if seed is not None else 0)

    def show(self, v: DecodeView) -> dict:
        """A DecodeView as component updates (every component in `view_outputs`)."""
        return {self.state: v.gen, self.text: v.text_html, self.stats: v.stats_md,
                self.candidates: v.candidates, self.timing: v.timing,
                self.at_step: gr.update(maximum=max(v.tokens - 1, 1), value=v.look_at,
                                        interactive=bool(v.tokens)),
                self.choice: gr.update(choices=v.choices, value=v.pick), self.shown: v.tokens,
                self.diagram: v.diagram}

    def playing(self, on: bool, interval: float | None = None) -> dict:
        """Start or stop the Play timer; the step-taking buttons wait while it runs."""
        timer = gr.Timer(value=float(interval), active=True) if on else gr.Timer(active=False)
        return {self.timer: timer, self.play_on: on,
                **{b: gr.update(interactive=not on)
                   for b in (self.step_btn, self.branch_btn, self.play_btn)}}


def _wire_steps(lm, settings: Settings, ui: DecodeUI, server) -> None:
    """Step, Play's ticks and Branch: the events that run the model."""
    def shown(before, gen, sampling) -> dict:
        """The view after a step; the step's cache counts against the memory budget."""
        if server is not None and gen is not None:
            server.budget.touch(gen)
        view = views(lm, gen, sampling)
        if before is not None and before.cache_freed:
            view = view._replace(stats_md=CACHE_FREED + "\n\n" + view.stats_md)
        return ui.show(view)

    def on_step(data: dict) -> dict:
        sampling, before = ui.sampling(data), data[ui.state]
        gen = step(lm, settings, before, data[ui.prompt], data[ui.max_new], sampling)
        return shown(before, gen, sampling)

    def on_tick(data: dict) -> dict:
        if not data[ui.play_on]:  # sent just before Pause, Stop or Reset: no step
            return ui.playing(False)
        sampling, before = ui.sampling(data), data[ui.state]
        gen, done = play_tick(lm, settings, before, data[ui.prompt], data[ui.max_new],
                              sampling)
        out = shown(before, gen, sampling)
        return {**out, **ui.playing(False)} if done else out

    def on_branch(data: dict) -> dict:
        before = data[ui.state]
        gen = branch_to(lm, before, data[ui.at_step], data[ui.choice])
        return shown(before, gen, ui.sampling(data))

    step_inputs = {ui.state, ui.prompt, ui.max_new} | ui.sampling_inputs
    on_model = dict(concurrency_id="model", time_limit=settings.step_time_limit_s)
    ui.step_btn.click(guarded(on_step, alone=server), step_inputs, ui.view_outputs,
                      api_name="decode_step", **on_model)
    ui.timer.tick(guarded(on_tick, plain=True, alone=server), step_inputs | {ui.play_on},
                  ui.view_outputs + ui.play_outputs, trigger_mode="once",
                  show_progress="hidden", api_name="decode_play_tick", **on_model)
    ui.branch_btn.click(guarded(on_branch, alone=server),
                        {ui.state, ui.at_step, ui.choice} | ui.sampling_inputs,
                        ui.view_outputs, api_name="decode_branch", **on_model)


def _wire_controls(lm, ui: DecodeUI) -> None:
    """Play, Pause, Stop, Reset, the sampling sliders and looking back at a step."""
    def on_play(gen, interval: float) -> dict:
        # Play after a finished or stopped run starts a new one, on purpose.
        fresh = None if gen is not None and gen.finished else gen
        return {**ui.playing(True, interval), ui.state: fresh}

    def on_pause() -> dict:
        return ui.playing(False)

    def on_stop(data: dict) -> dict:
        stop(data[ui.state], data[ui.shown])
        return {**ui.playing(False), **ui.show(views(lm, data[ui.state], ui.sampling(data)))}

    def on_reset(data: dict) -> dict:
        return {**ui.playing(False), **ui.show(views(lm, None, ui.sampling(data)))}

    def on_sampling(data: dict) -> dict:
        return ui.show(views(lm, data[ui.state], ui.sampling(data)))

    def on_look(data: dict) -> dict:
        v = views(lm, data[ui.state], ui.sampling(data), at_step=data[ui.at_step])
        return {ui.candidates: v.candidates, ui.timing: v.timing,
                ui.choice: gr.update(choices=v.choices, value=v.pick)}

    # Play and Pause only switch the timer: they answer at once, even while a step runs
    ui.play_btn.click(guarded(on_play, compute=False), [ui.state, ui.speed],
                      ui.play_outputs + [ui.state], api_name="decode_play")
    ui.pause_btn.click(guarded(on_pause, compute=False), None, ui.play_outputs,
                       api_name="decode_pause")
    # Stop waits for a step in flight; the chained redraw makes the stopped view the last one
    ui.stop_btn.click(guarded(on_stop), {ui.state, ui.shown} | ui.sampling_inputs,
                      ui.play_outputs + ui.view_outputs, api_name="decode_stop").then(
        guarded(on_sampling), {ui.state} | ui.sampling_inputs, ui.view_outputs,
        show_progress="hidden")
    ui.reset_btn.click(guarded(on_reset), ui.sampling_inputs, ui.play_outputs + ui.view_outputs,
                       api_name="decode_reset")
    # `.input` fires for a drag and for a value typed into a slider's box (`.release` misses it)
    gr.on([c.input for c in (ui.temperature, ui.top_k, ui.top_p)], guarded(on_sampling),
          {ui.state} | ui.sampling_inputs, ui.view_outputs, show_progress="hidden",
          trigger_mode="always_last", api_name="decode_sampling")
    gr.on([ui.at_step.input, ui.at_step.release], guarded(on_look),
          {ui.state, ui.at_step} | ui.sampling_inputs, [ui.candidates, ui.timing, ui.choice],
          show_progress="hidden", trigger_mode="always_last", api_name="decode_look")


def build(ctx: AppContext) -> None:
    """Lesson 3 in the caller's tab: each Step runs alone on the compute thread (its own times)."""
    lm, settings, server = ctx.lm, ctx.settings, ctx.server
    ui = DecodeUI(settings, server.budget if server is not None else None, lm.info.layers)
    _wire_steps(lm, settings, ui, server)
    _wire_controls(lm, ui)
