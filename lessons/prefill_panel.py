"""Lesson 2 panel: one parallel pass over the prompt, measured; and a sweep of prefill
against one-token-at-a-time over prompt lengths."""
from __future__ import annotations

import statistics
from typing import Iterator

import gradio as gr

from inference.config import Settings
from inference.generation import stream
from inference.experiments.prefill_sweep import prefill_sweep
from inference.tokens import prompt_ids
from visualizations.style import machine_caption
from visualizations.timing_charts import prefill_sweep_figure

from .feedback import user_error
from .lesson_text import lesson_text

LENGTH_CHOICES = [1, 8, 32, 128, 512, 1024]


def measure_prompt(lm, settings: Settings, prompt: str) -> str:
    """Prefill the chat-templated prompt, then take 4 decode steps; explain with the numbers."""
    ids = prompt_ids(lm.tokenizer, prompt, max_chars=settings.max_prompt_chars,
                     max_tokens=settings.max_prompt_tokens)
    events = list(stream(lm, ids, max_new_tokens=5))
    first, rest = events[0], events[1:]
    ttft = first.seconds
    prefill_ms = first.forward_seconds * 1000
    tpot = statistics.median(e.seconds for e in rest) if rest else None
    lines = [
        f"**Measured on this machine:** your prompt is **{len(ids)} tokens** (chat template included).",
        f"- Prefill: all {len(ids)} tokens in **one forward pass**: **{prefill_ms:.0f} ms** "
        f"({len(ids) / first.forward_seconds:,.0f} tokens/s). Time to first token: **{ttft * 1000:.0f} ms**.",
    ]
    if tpot:
        per_tok = first.forward_seconds / len(ids)
        lines += [
            f"- A decode step, which processes **1 token**, took **{tpot * 1000:.0f} ms** (median of "
            f"{len(rest)}).",
            f"- So prefill spent **{per_tok * 1000:.1f} ms per prompt token**, "
            f"**{tpot / per_tok:.0f}×** less than a decode step spends on its single token: "
            f"the weights were read once for all {len(ids)} tokens instead of once per token.",
            f"- Why the first token is slower: it waits for the whole prefill "
            f"({ttft * 1000:.0f} ms ≈ {ttft / tpot:.1f} decode steps here). Longer prompts push "
            f"it further; the next tokens each cost about one decode step, whatever the prompt length.",
        ]
    return "\n".join(lines)


def run_sweep(lm, shared, lengths: list[int], max_sequential: int
              ) -> Iterator[tuple[object, str]]:
    """Yield (figure, progress line) as each length is measured; share finished sweeps."""
    info = lm.info
    caption = machine_caption(info.device, info.dtype, info.threads)
    lengths = sorted({int(n) for n in lengths}) or [8, 32, 128]
    key = ("prefill_sweep", tuple(lengths), int(max_sequential))
    done = shared.get(key) if shared is not None else None
    if done is not None:
        yield prefill_sweep_figure(done, caption), "Measured earlier on this machine (shared result)."
        return
    yield prefill_sweep_figure([], caption), "Warming up…"
    points = ()
    for progress in prefill_sweep(lm, lengths, max_sequential):
        points = progress.points
        last = points[-1]
        yield (prefill_sweep_figure(points, caption),
               f"Measured {progress.done}/{progress.total}: {last.tokens} tokens → prefill "
               f"{last.parallel_seconds * 1000:.0f} ms vs one-at-a-time "
               f"{last.sequential_seconds * 1000:.0f} ms"
               + ("" if last.sequential_measured else " (extrapolated)"))
    if shared is not None:
        shared.put(key, points)
    measured = [p for p in points if p.sequential_measured]
    last = measured[-1] if measured else points[-1]
    ratio = last.sequential_seconds / last.parallel_seconds
    how = "measured both ways" if last.sequential_measured else "one-at-a-time extrapolated"
    yield (prefill_sweep_figure(points, caption),
           f"Done. At {last.tokens} tokens ({how}), one pass is **{ratio:.0f}×** faster than "
           f"feeding the tokens one at a time.")


def build(lm, settings: Settings, shared=None) -> None:
    gr.Markdown(lesson_text("lesson2_prefill.md"))
    with gr.Row():
        prompt = gr.Textbox(label="Prompt", lines=2, scale=4, max_length=settings.max_prompt_chars,
                            value="Summarise the plot of Romeo and Juliet in three sentences.",
                            elem_id="prefill-prompt")
        run = gr.Button("Prefill it", variant="primary", scale=1, elem_id="prefill-run")
    result = gr.Markdown("*Press **Prefill it** to time one parallel pass over your prompt.*",
                         elem_id="prefill-result")
    gr.Markdown("### Sweep: one pass for the whole prompt vs one pass per token")
    with gr.Row():
        lengths = gr.CheckboxGroup(LENGTH_CHOICES, value=[1, 8, 32, 128, 512],
                                   label="Prompt lengths (tokens)")
        max_seq = gr.Slider(8, 256, value=128, step=8, elem_id="prefill-maxseq",
                            label="Measure one-at-a-time up to (tokens); longer is extrapolated")
    with gr.Row():
        sweep_btn = gr.Button("Run the sweep", variant="primary", elem_id="prefill-sweep")
        stop_btn = gr.Button("Stop", variant="stop")
    progress = gr.Markdown(elem_id="prefill-progress")
    info = lm.info
    chart = gr.Plot(prefill_sweep_figure([], machine_caption(info.device, info.dtype, info.threads)),
                    label="Prefill sweep", elem_id="prefill-chart")

    def on_run(p):
        try:
            return measure_prompt(lm, settings, p)
        except Exception as exc:
            raise user_error(exc) from exc

    def on_sweep(ls, ms):
        try:
            yield from run_sweep(lm, shared, ls, ms)
        except Exception as exc:
            raise user_error(exc) from exc

    run.click(on_run, prompt, result, concurrency_id="model", time_limit=60,
              api_name="prefill_measure")
    ev = sweep_btn.click(lambda: gr.update(interactive=False), None, sweep_btn).then(
        on_sweep, [lengths, max_seq], [chart, progress], concurrency_id="heavy",
        concurrency_limit=1, time_limit=300, api_name="prefill_sweep")
    ev.then(lambda: gr.update(interactive=True), None, sweep_btn)
    stop_btn.click(lambda: gr.update(interactive=True), None, sweep_btn, cancels=[ev])
