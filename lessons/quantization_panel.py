"""Lesson 6 panel: quantization measured. Pick precision modes, build each from the loaded
model (with progress, cached per process), and compare them with float32 on one prompt:
bytes, prefill, decode speed, agreement, KL and perplexity, plus the roofline-style chart and
the generated texts side by side.

`compare_frames` is a plain generator of `QuantFrame` records (tested on the real model);
`build()` lays out the controls and the results and wires it as a long, stoppable,
one-at-a-time event (`concurrency_id="heavy"`).
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from typing import NamedTuple

import gradio as gr
import torch

from inference.config import Settings
from inference.experiments.quality import (
    ModeReport,
    compare_mode,
    load_perplexity_text,
    reference_run,
)
from inference.experiments.roofline import machine_bandwidth
from inference.quant_modes import (
    DEFAULT_MODES,
    HEAD_TREATMENT,
    MODES,
    build_mode,
    build_steps,
    get_mode,
)
from visualizations import quant_charts as charts
from visualizations.quant_text import (
    closing_note_md,
    head_treatment_md,
    results_table_md,
    weights_origin_md,
)
from visualizations.style import info_caption

from .common.controls import slider
from .common.feedback import guarded
from .common.guess import guess_box, guess_md
from .common.lesson_text import lesson_text
from .common.exports import keep_modes
from .common.prompt_input import encode_prompt

DEFAULT_PROMPT = "Explain why the sky is blue in two sentences."
GUESS_KEY = "int8"  # the presenter screen whose question the comparison answers
BANDWIDTH_NOTE = ", read-only sum, measured"
MAX_PROMPT_TOKENS = 512  # every mode prefills the prompt: keep the whole comparison short
BUILD_UPDATE_S = 0.5  # at most two progress lines a second while a mode is built
BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # x86 flags for native bfloat16 arithmetic


class QuantFrame(NamedTuple):
    """One update of the comparison: a progress line, and the reports so far when they
    changed (None: only the progress line is new)."""

    message: str
    reports: tuple[ModeReport, ...] | None = None
    bandwidth_gbs: float | None = None  # measured read bandwidth, for the roofline


def native_bf16(cpuinfo: str) -> bool | None:
    """Whether a CPU has native bfloat16 arithmetic, from the text of /proc/cpuinfo: True or
    False from its `flags` lines, None when there are none (not x86, or nothing to read)."""
    flags = {f for line in cpuinfo.splitlines() if line.split(":")[0].strip() == "flags"
             for f in line.split(":", 1)[-1].split()}
    if not flags:
        return None
    return any(f in flags for f in BF16_FLAGS)


def read_cpuinfo(path: str = "/proc/cpuinfo") -> str:
    """The text of /proc/cpuinfo ('' where there is none)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def device_bf16(device) -> bool | None:
    """Native bfloat16 on this device's CPU; None on a GPU (its flags say nothing there)."""
    return native_bf16(read_cpuinfo()) if torch.device(device).type == "cpu" else None


def chosen_modes(modes: list[str] | None) -> list[str]:
    """Validated mode keys in registry order, fp32 first (it is the baseline)."""
    picked = set(modes or []) | {"fp32"}
    for key in picked:
        get_mode(key)  # raises a clear error for anything unknown
    return [k for k in MODES if k in picked]


def _reference(lm, shared, prompt: str, ids: list[int], n: int):
    """fp32's greedy answer and log-probabilities; the default prompt's is shared by all."""
    fp32 = build_mode(lm, "fp32", shared).model  # the baseline (lm.model itself on a CPU)
    if prompt != DEFAULT_PROMPT:  # other prompts are not kept
        return reference_run(fp32, ids, n, lm.device)
    return shared.get_or_compute(("quant-reference", str(lm.device), tuple(ids), n),
                                 lambda: reference_run(fp32, ids, n, lm.device))


def compare_frames(lm, settings: Settings, shared, prompt: str, modes: list[str] | None,
                   new_tokens: int) -> Iterator[QuantFrame]:
    """Build and measure each chosen mode against float32; a frame after every step."""
    settings.quant_new_tokens.check("New tokens", new_tokens)
    n = int(new_tokens)
    keys = chosen_modes(modes)
    ids = encode_prompt(lm, settings, prompt, max_tokens=MAX_PROMPT_TOKENS)
    device = lm.device
    bandwidth = machine_bandwidth(shared, device)
    text_ids = lm.tokenizer(load_perplexity_text(), add_special_tokens=False)["input_ids"]
    reports: list[ModeReport] = []

    yield QuantFrame(f"⏳ float32 reference: greedy answer of {n} tokens…")
    ref = _reference(lm, shared, prompt, ids, n)
    for i, key in enumerate(keys, start=1):
        built, shown = None, 0.0
        for step in build_steps(lm, key, shared):
            built = step.built
            if built is None and time.perf_counter() - shown > BUILD_UPDATE_S:
                shown = time.perf_counter()
                yield QuantFrame(f"⏳ [{i}/{len(keys)}] building {step.message} "
                                 f"({step.done}/{step.total})")
        yield QuantFrame(f"⏳ [{i}/{len(keys)}] measuring {built.mode.label}…")
        reports.append(compare_mode(built, lm.tokenizer, ref, text_ids, device))
        yield QuantFrame(f"⏳ measured {len(reports)} of {len(keys)} modes", tuple(reports),
                         bandwidth)
    keep_modes(lm, shared, reports)
    yield QuantFrame(f"✅ measured {len(reports)} modes at {time.strftime('%H:%M:%S')} "
                     f"({len(ids)}-token prompt, {n} greedy tokens, {len(text_ids)}-token "
                     "perplexity text)", tuple(reports), bandwidth)


def _controls(settings: Settings) -> tuple[gr.Textbox, gr.CheckboxGroup, gr.Slider, gr.Button,
                                           gr.Button]:
    with gr.Row():
        with gr.Column(scale=3):
            prompt = gr.Textbox(label="Prompt", value=DEFAULT_PROMPT, lines=2,
                                max_length=settings.max_prompt_chars, elem_id="quant-prompt")
            modes = gr.CheckboxGroup(
                choices=[(m.label, m.key) for m in MODES.values()], value=list(DEFAULT_MODES),
                label="Precision modes (float32 always runs: it is the baseline)",
                elem_id="quant-modes")
        with gr.Column(scale=1):
            new_tokens = slider(settings, "quant_new_tokens", "Greedy tokens to compare",
                                elem_id="quant-new-tokens")
            guess = guess_box(settings, GUESS_KEY, "int8 decode speed, in times float32's",
                              "quant-guess")
            run_btn = gr.Button("Compare modes", variant="primary", elem_id="quant-run")
            stop_btn = gr.Button("Stop", variant="stop", elem_id="quant-stop")
    return prompt, modes, new_tokens, guess, run_btn, stop_btn


def compared(reports, guess: float | None) -> str:
    """The learner's guess beside int8's measured speed against float32 (once both ran)."""
    by_key = {r.key: r for r in reports}
    if "int8" not in by_key or "fp32" not in by_key:
        return ""
    return guess_md(GUESS_KEY, guess, by_key["int8"].decode_tokens_per_s
                    / by_key["fp32"].decode_tokens_per_s)


def build(lm, settings: Settings, shared, server=None) -> None:
    origin = weights_origin_md(lm.info.source, lm.info.dtype)
    gr.Markdown(lesson_text("lesson6_quantization.md", lm.info, {"weights_origin": origin}))
    bf16 = device_bf16(lm.device)  # checked once: said only where it was checked
    prompt, modes, new_tokens, guess, run_btn, stop_btn = _controls(settings)
    progress = gr.Markdown("*Building a mode copies the model and converts it (seconds); it is "
                           "then kept for everyone using this app.*", elem_id="quant-progress")
    roofline = gr.Plot(charts.roofline_figure([], 0.0), label="Bytes per token vs decode speed",
                       elem_id="quant-roofline")
    bars = gr.Plot(charts.mode_bars_figure([]), label="Per mode", elem_id="quant-bars")
    table = gr.Markdown(elem_id="quant-table")
    texts = gr.HTML(charts.side_by_side_html([]), elem_id="quant-texts")
    closing = gr.Markdown(closing_note_md(lm.info, [], None, bf16), elem_id="quant-closing")
    gr.Markdown(head_treatment_md(HEAD_TREATMENT))
    caption = info_caption(lm.info, dtype="dtype per mode")

    def shown(frame: QuantFrame, guessed: float | None) -> dict:
        if frame.reports is None:
            return {progress: frame.message}
        r, bw = frame.reports, frame.bandwidth_gbs
        return {progress: frame.message,
                roofline: charts.roofline_figure(r, bw, BANDWIDTH_NOTE, caption,
                                                 charts.WEIGHT_BYTES_AXIS),
                bars: charts.mode_bars_figure(r, caption), table: results_table_md(r),
                texts: charts.side_by_side_html(r),
                closing: closing_note_md(lm.info, r, bw, bf16) + compared(r, guessed)}

    def run(p: str, m: list[str], n: int, guessed: float | None) -> Iterator[dict]:
        for frame in compare_frames(lm, settings, shared, p, m, n):
            yield shown(frame, guessed)

    ev = run_btn.click(guarded(run, alone=server), [prompt, modes, new_tokens, guess],
                       [progress, roofline, bars, table, texts, closing],
                       concurrency_id="heavy", concurrency_limit=1, time_limit=900,
                       api_name="quant_compare")
    stop_btn.click(None, None, None, cancels=[ev])
