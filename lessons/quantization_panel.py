"""Lesson 6 panel: quantization measured. Pick precision modes, build each from the loaded
model (with progress, cached per process), and compare them with float32 on one prompt:
bytes, prefill, decode speed, agreement, KL and perplexity, plus the roofline-style chart and
the generated texts side by side.

`compare_frames` is a plain generator (tested on the real model); `build()` lays out the
controls and wires it as a long, stoppable, one-at-a-time event (`concurrency_id="heavy"`).
"""
from __future__ import annotations

import time
from typing import Iterator

import gradio as gr

from inference.config import Settings
from inference.errors import check_range
from inference.experiments.roofline import measure_read_bandwidth
from inference.experiments.quality import (compare_mode, load_perplexity_text,
                               reference_run)
from inference.quant_modes import (DEFAULT_MODES, HEAD_TREATMENT, MODES, build_mode, build_steps,
                                   get_mode)
from inference.tokens import prompt_ids
from visualizations import quant_charts as charts
from visualizations.style import machine_caption

from .feedback import user_error
from .lesson_text import lesson_text

DEFAULT_PROMPT = "Explain why the sky is blue in two sentences."
BANDWIDTH_NOTE = ", read-only sum, measured"


def results_table(reports) -> str:
    """Markdown table of every measured number per mode."""
    if not reports:
        return ""
    headers, rows = charts.mode_table(reports)
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def closing_note(lm, reports, bandwidth_gbs: float | None) -> str:
    """What this machine showed, from this run's numbers."""
    head = (f"### What this machine showed ({lm.info.device}, {lm.info.threads} threads"
            + (f", read bandwidth {bandwidth_gbs:.1f} GB/s measured" if bandwidth_gbs else "") + ")")
    if not reports:
        return head + "\n\nPress **Compare modes** to fill this in."
    lines = [head]
    for r in reports:
        lines.append(f"- **{r.key}**: {r.weight_bytes / 1e6:.0f} MB ({r.ratio_to_fp32:.2f}× fp32), "
                     f"decode **{r.decode_tokens_per_s:.1f} tokens/s**, prefill of {r.prompt_tokens} "
                     f"tokens {r.prefill_seconds * 1000:.0f} ms, top-1 agreement "
                     f"**{100 * r.top1_agreement:.0f}%** ({100 * r.top1_decided:.0f}% where fp32 was decided), KL {r.kl_mean:.4f} nats, perplexity "
                     f"{r.perplexity:.2f} · {r.kernel}")
    by_key = {r.key: r for r in reports}
    base = by_key.get("fp32")
    if base and len(reports) > 1:
        fastest = max(reports, key=lambda r: r.decode_tokens_per_s)
        lines.append(f"\nFastest decode here: **{fastest.key}**, "
                     f"{fastest.decode_tokens_per_s / base.decode_tokens_per_s:.1f}× float32.")
        bf16 = by_key.get("bf16")
        if bf16 and bf16.decode_tokens_per_s < base.decode_tokens_per_s:
            lines.append("bfloat16 holds half the bytes yet decoded slower than float32 here: this "
                         "CPU has no native bfloat16 arithmetic, so the kernel, not memory, is the limit.")
    lines.append("\n*Timings on a shared machine are noisy; rerun to see the spread.*")
    return "\n".join(lines)


def _chosen_modes(modes: list[str] | None) -> list[str]:
    """Validated mode keys in registry order, fp32 first (it is the baseline)."""
    picked = set(modes or []) | {"fp32"}
    for key in picked:
        get_mode(key)  # raises a clear error for anything unknown
    return [k for k in MODES if k in picked]


def compare_frames(lm, settings: Settings, shared, prompt: str, modes: list[str] | None,
                   new_tokens: int) -> Iterator[tuple]:
    """Yield (progress, roofline fig, bars fig, table md, texts html, closing md) as modes finish."""
    check_range("New tokens", new_tokens, 8, 64)
    n = int(new_tokens)
    keys = _chosen_modes(modes)
    ids = prompt_ids(lm.tokenizer, prompt, max_chars=settings.max_prompt_chars,
                     max_tokens=min(settings.max_prompt_tokens, 512))
    device = lm.device
    caption = machine_caption(lm.info.device, "dtype per mode", lm.info.threads)
    bandwidth = shared.get_or_compute(("read-bandwidth", str(device)),
                                      lambda: measure_read_bandwidth(device))
    text_ids = lm.tokenizer(load_perplexity_text(), add_special_tokens=False)["input_ids"]
    reports: list = []

    def frame(message: str) -> tuple:
        return (message, charts.roofline_figure(reports, bandwidth, BANDWIDTH_NOTE, caption),
                charts.mode_bars_figure(reports, caption), results_table(reports),
                charts.side_by_side_html(reports), closing_note(lm, reports, bandwidth))

    yield (f"⏳ float32 reference: greedy answer of {n} tokens…",) + (gr.skip(),) * 5
    fp32 = build_mode(lm, "fp32", shared).model  # the baseline (lm.model itself on a CPU)
    if prompt == DEFAULT_PROMPT:  # shared by every visitor; other prompts are not kept
        ref = shared.get_or_compute(("quant-reference", str(device), tuple(ids), n),
                                    lambda: reference_run(fp32, ids, n, device))
    else:
        ref = reference_run(fp32, ids, n, device)
    for i, key in enumerate(keys):
        built, shown = None, 0.0
        for step in build_steps(lm, key, shared):
            built = step.built
            if built is None and time.perf_counter() - shown > 0.5:  # at most 2 updates/s
                shown = time.perf_counter()
                yield (f"⏳ [{i + 1}/{len(keys)}] building {step.message} "
                       f"({step.done}/{step.total})",) + (gr.skip(),) * 5
        yield (f"⏳ [{i + 1}/{len(keys)}] measuring {built.mode.label}…",) + (gr.skip(),) * 5
        reports.append(compare_mode(built, lm.tokenizer, ref, text_ids, device))
        yield frame(f"⏳ measured {len(reports)} of {len(keys)} modes")
    yield frame(f"✅ measured {len(reports)} modes at {time.strftime('%H:%M:%S')} "
                f"({len(ids)}-token prompt, {n} greedy tokens, {len(text_ids)}-token perplexity text)")


def build(lm, settings: Settings, shared) -> None:
    gr.Markdown(lesson_text("lesson6_quantization.md"))
    with gr.Row():
        with gr.Column(scale=3):
            prompt = gr.Textbox(label="Prompt", value=DEFAULT_PROMPT, lines=2,
                                max_length=settings.max_prompt_chars, elem_id="quant-prompt")
            modes = gr.CheckboxGroup(
                choices=[(m.label, m.key) for m in MODES.values()], value=list(DEFAULT_MODES),
                label="Precision modes (float32 always runs: it is the baseline)",
                elem_id="quant-modes")
        with gr.Column(scale=1):
            new_tokens = gr.Slider(8, 64, value=32, step=1, label="Greedy tokens to compare",
                                   elem_id="quant-new-tokens")
            run_btn = gr.Button("Compare modes", variant="primary", elem_id="quant-run")
            stop_btn = gr.Button("Stop", variant="stop", elem_id="quant-stop")
    progress = gr.Markdown("*Building a mode copies the model and converts it (seconds); it is then "
                           "kept for everyone using this app.*", elem_id="quant-progress")
    roofline = gr.Plot(charts.roofline_figure([], 0.0), label="Bytes per token vs decode speed",
                       elem_id="quant-roofline")
    bars = gr.Plot(charts.mode_bars_figure([]), label="Per mode", elem_id="quant-bars")
    table = gr.Markdown(elem_id="quant-table")
    texts = gr.HTML(charts.side_by_side_html([]), elem_id="quant-texts")
    closing = gr.Markdown(closing_note(lm, [], None), elem_id="quant-closing")
    gr.Markdown("**Embedding / output head:** " + " ".join(
        f"*{kind}*: {text}" for kind, text in HEAD_TREATMENT.items()))

    def run(p, m, n):
        try:
            yield from compare_frames(lm, settings, shared, p, m, n)
        except Exception as exc:
            raise user_error(exc) from exc

    ev = run_btn.click(run, [prompt, modes, new_tokens],
                       [progress, roofline, bars, table, texts, closing],
                       concurrency_id="heavy", concurrency_limit=1, time_limit=900,
                       api_name="quant_compare")
    stop_btn.click(None, None, None, cancels=[ev])

