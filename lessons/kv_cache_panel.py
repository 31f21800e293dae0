"""Lesson 4 panel: the KV cache seen growing, raced against recomputation, projected, reused.

Handlers are plain module-level functions (tested directly on the real model); `build()`
only lays out controls and wires them. Long runs stream progress and have a Stop button.
"""
from __future__ import annotations

from typing import Iterator

import gradio as gr

from inference.experiments.attention_view import AttentionView, newest_attention
from inference.config import Settings
from inference.errors import PromptTooLongError, SettingOutOfRangeError, check_range
from inference.generation import stream
from inference.experiments.kv_growth import watch_growth
from inference.kv_cache import cache_tensor_bytes
from inference.experiments.kv_projection import (PUBLISHED, as_mha, crossover_tokens, doubling_range,
                                     project_batch, project_context, this_model)
from inference.experiments.kv_race import race, summarize
from inference.experiments.prefix_reuse import prefill_prefix, prefix_runs, shared_prefix_ids
from inference.tokens import prompt_ids
from visualizations import kv_charts
from visualizations.model_card import human_bytes
from visualizations.style import empty_figure, machine_caption

from .feedback import guarded
from .lesson_text import lesson_text

RACE_MAX_PROMPT = 256  # the recompute lane pushes the whole sequence through every step
DEFAULT_PROMPT = "Explain why the sky is blue in two sentences."
DEFAULT_SYSTEM = (
    "You are the visitor assistant of the Riverside Science Museum. The museum opens at 9:00 "
    "and closes at 17:00 every day except Monday. Tickets cost 12 euros for adults, 6 euros for "
    "children under 14, and entry is free for members. The galleries are: Fossils and Deep Time "
    "on the ground floor, Light and Colour on the first floor, and the Planetarium on the top "
    "floor, with shows every hour. The cafe is next to the main entrance and serves lunch from "
    "11:30. Lockers are free and are found by the cloakroom. Photography without flash is allowed "
    "everywhere except the Planetarium. Answer visitors briefly, politely and only from these facts.")
DEFAULT_QUESTIONS = "When does the museum close?\nHow much is a child ticket?\nWhere is the cafe?"


def _caption(lm) -> str:
    return machine_caption(lm.info.device, lm.info.dtype, lm.info.threads)


def _ids(lm, settings: Settings, prompt: str) -> list[int]:
    return prompt_ids(lm.tokenizer, prompt, max_chars=settings.max_prompt_chars,
                      max_tokens=settings.max_prompt_tokens)


def growth_frames(lm, settings: Settings, prompt: str, max_new: int) -> Iterator[tuple]:
    """Yield (cache grid, bytes chart, formula markdown, text markdown) after every step."""
    ids = _ids(lm, settings, prompt)
    check_range("New tokens", int(max_new), 1, 128)
    history: list[tuple[int, int, int]] = []
    for step in watch_growth(lm, ids, int(max_new)):
        snap = step.cache
        history.append((snap.tokens, snap.tensor_bytes, snap.formula_bytes))
        what = "prefill of the prompt" if step.index == 0 else "one decode step"
        text = (f"**Step {step.index}** ({what}, {step.seconds * 1000:.0f} ms): cache holds "
                f"**{snap.tokens} tokens** ({step.prompt_tokens} prompt + {snap.tokens - step.prompt_tokens} "
                f"generated) · {human_bytes(snap.tensor_bytes)}  \n*Output so far:* {step.text!r}")
        yield (kv_charts.cache_grid_figure(snap, step.prompt_tokens, _caption(lm)),
               kv_charts.cache_bytes_figure(history, _caption(lm)),
               kv_charts.formula_markdown(snap), text)


def race_frames(lm, settings: Settings, prompt: str, new_tokens: int) -> Iterator[tuple]:
    """Yield (latency chart, summary markdown, progress line) after every pair of steps."""
    ids = _ids(lm, settings, prompt)
    if len(ids) > RACE_MAX_PROMPT:
        raise PromptTooLongError(f"The race prompt is {len(ids)} tokens; keep it under "
                                 f"{RACE_MAX_PROMPT} (the no-cache lane re-reads all of it every step).")
    n = int(new_tokens)
    steps = []
    for step in race(lm, ids, n):
        steps.append(step)
        if step.lane == "recompute":
            summary = summarize(steps, len(ids))
            progress = f"Step {step.index + 1} of {n} · both lanes ran it"
            yield (kv_charts.race_figure(steps, _caption(lm)),
                   kv_charts.race_summary_markdown(summary), progress)


def projection_view(lm, batch: int, context: int, bytes_per_value: int) -> tuple:
    """(context chart, batch chart, GQA chart, markdown): all theoretical, from the formula."""
    batch, context, bpv = int(batch), int(context), int(bytes_per_value)
    check_range("Batch size", batch, 1, 1024)
    check_range("Context length", context, 16, 131_072)
    if bpv not in (1, 2, 4):
        raise SettingOutOfRangeError("Bytes per value must be 1, 2 or 4.")
    mine = this_model(lm.info)
    shapes = [mine, *PUBLISHED]
    cap = "theoretical: bytes = 2 × layers × KV heads × head dim × bytes per value × tokens × batch"
    by_context = project_context(shapes, doubling_range(256, 131_072), batch, bpv)
    by_batch = project_batch(shapes, doubling_range(1, 256), context, bpv)
    mha = as_mha(mine)
    gqa_rows = [(f"{mine.name}: {mine.kv_heads} KV heads (GQA)", mine.bytes_per_token(bpv)),
                (f"as MHA: {mha.kv_heads} KV heads", mha.bytes_per_token(bpv))]
    lines = ["| model | attention | KV heads / query heads | cache per token | weights | cache = weights at |",
             "|---|---|---|---|---|---|"]
    for s in shapes:
        lines.append(f"| {s.name} | {s.attention} | {s.kv_heads} / {s.query_heads} | "
                     f"{human_bytes(s.bytes_per_token(bpv))} | {human_bytes(s.weight_bytes(bpv))} | "
                     f"{crossover_tokens(s, bpv, batch):,} tokens × {batch} sequence(s) |")
    ratio = mine.query_heads // mine.kv_heads
    md = ("\n".join(lines) + f"\n\n*Theoretical, {bpv} bytes per value for weights and cache.* "
          f"{mine.name} shares each KV head among {ratio} query heads, so its cache is {ratio}× "
          f"smaller than with full multi-head attention. This model's context window is "
          f"{lm.info.context_window:,} tokens; longer contexts are shown for the larger models. "
          "Mistral-7B and Llama-3-8B have the same cache shape, so their cache lines coincide.")
    return (kv_charts.projection_figure(by_context, cap, highlight=mine.name),
            kv_charts.projection_figure(by_batch, cap, highlight=mine.name),
            kv_charts.gqa_figure(gqa_rows, cap), md)


def prefix_frames(lm, settings: Settings, system: str, questions: str, new_tokens: int
                  ) -> Iterator[tuple]:
    """Prefill the system prompt once, then answer each question both ways: (chart, markdown)."""
    qs = [q.strip() for q in (questions or "").splitlines() if q.strip()][:4]
    if len(system or "") > settings.max_prompt_chars:
        raise PromptTooLongError(f"The system prompt is over {settings.max_prompt_chars:,} characters.")
    ids = shared_prefix_ids(lm.tokenizer, system)
    prefix = prefill_prefix(lm, ids)
    head = (f"Shared prefix: **{len(ids)} tokens**, prefilled once in "
            f"**{prefix.seconds * 1000:.0f} ms** ({human_bytes(cache_tensor_bytes(prefix.cache))} of cache, "
            f"kept for every question).")
    runs = []
    yield kv_charts.prefix_figure(runs, _caption(lm)), head
    for run in prefix_runs(lm, prefix, system, qs, int(new_tokens)):
        runs.append(run)
        rows = [f"| {r.question} | {r.prompt_tokens} | {r.reused_tokens} | {r.ttft_full * 1000:.0f} ms | "
                f"{r.ttft_reuse * 1000:.0f} ms | {r.speedup:.1f}× | {'✓ same' if r.same else '✗ differ'} | "
                f"{r.text!r} |" for r in runs]
        table = ("| question | prompt tokens | reused | TTFT full | TTFT reused | speed-up | tokens | answer |\n"
                 "|---|---|---|---|---|---|---|---|\n" + "\n".join(rows))
        yield kv_charts.prefix_figure(runs, _caption(lm)), head + "\n\n" + table


def attention_run(lm, settings: Settings, prompt: str, new_tokens: int) -> AttentionView:
    """Generate a few greedy tokens, then read the newest token's attention in every layer."""
    ids = _ids(lm, settings, prompt)
    check_range("New tokens", int(new_tokens), 1, 64)
    generated = [ev.token_id for ev in stream(lm, ids, max_new_tokens=int(new_tokens))]
    return newest_attention(lm, ids + generated)


def attention_redraw(lm, view: AttentionView | None, layer: int, head: int):
    if view is None:
        return empty_figure("Press Show attention: the newest token's weights appear here.")
    layer = min(max(int(layer), 0), view.layers - 1)
    head = min(max(int(head), 0), view.query_heads - 1)
    return kv_charts.attention_figure(view, layer, head, _caption(lm))


def build(lm, settings: Settings, shared=None) -> None:
    """Lay out Lesson 4 inside the caller's tab. `shared` is accepted for the common signature."""
    gr.Markdown(lesson_text("lesson4_kv_cache.md"), elem_id="kv-lesson-text")
    with gr.Tabs():
        with gr.Tab("1 · Watch it grow"):
            with gr.Row():
                g_prompt = gr.Textbox(DEFAULT_PROMPT, label="Prompt", lines=2, scale=3,
                                      max_length=settings.max_prompt_chars, elem_id="kv-growth-prompt")
                g_new = gr.Slider(1, 128, value=32, step=1, label="New tokens", scale=1)
            with gr.Row():
                g_btn = gr.Button("Generate and watch the cache", variant="primary", elem_id="kv-growth-btn")
                g_stop = gr.Button("Stop", variant="stop", elem_id="kv-growth-stop")
            g_text = gr.Markdown(elem_id="kv-growth-text")
            g_formula = gr.Markdown(elem_id="kv-formula")
            g_grid = gr.Plot(label="Cache tensors", elem_id="kv-growth-grid")
            g_bytes = gr.Plot(label="Cache bytes", elem_id="kv-growth-bytes")
        with gr.Tab("2 · Race: cache on vs off"):
            gr.Markdown("Same prompt, same greedy tokens. With the cache each step feeds **one** token "
                        "(O(1) tokens per step); without it each step feeds the **whole sequence** "
                        "again (O(sequence)), so its steps get slower as the text grows.")
            with gr.Row():
                r_prompt = gr.Textbox(DEFAULT_PROMPT, label="Prompt", lines=2, scale=3,
                                      max_length=settings.max_prompt_chars, elem_id="kv-race-prompt")
                r_new = gr.Slider(4, 128, value=48, step=1, label="New tokens", scale=1)
            with gr.Row():
                r_btn = gr.Button("Race", variant="primary", elem_id="kv-race-btn")
                r_stop = gr.Button("Stop", variant="stop", elem_id="kv-race-stop")
            r_progress = gr.Markdown(elem_id="kv-race-progress")
            r_summary = gr.Markdown(elem_id="kv-race-summary")
            r_plot = gr.Plot(label="Per-step latency", elem_id="kv-race-plot")
        with gr.Tab("3 · Memory projection"):
            with gr.Row():
                p_batch = gr.Slider(1, 256, value=1, step=1, label="Batch size (context chart)")
                p_context = gr.Slider(256, 131_072, value=4096, step=256,
                                      label="Context length (batch chart)")
                p_bpv = gr.Radio([("fp32 (4 bytes)", 4), ("fp16/bf16 (2)", 2), ("int8/fp8 (1)", 1)],
                                 value=2, label="Bytes per value")
            first = projection_view(lm, 1, 4096, 2)  # cheap formula: drawn at build time
            p_table = gr.Markdown(first[3], elem_id="kv-projection-table")
            p_context_plot = gr.Plot(first[0], elem_id="kv-projection-context", label="KV memory vs context length")
            p_batch_plot = gr.Plot(first[1], elem_id="kv-projection-batch", label="KV memory vs batch size")
            p_gqa = gr.Plot(first[2], elem_id="kv-projection-gqa", label="Grouped-query vs multi-head attention")
        with gr.Tab("4 · Prefix reuse"):
            x_system = gr.Textbox(DEFAULT_SYSTEM, label="Shared system prompt", lines=5,
                                  max_length=settings.max_prompt_chars, elem_id="kv-prefix-system")
            with gr.Row():
                x_questions = gr.Textbox(DEFAULT_QUESTIONS, label="Questions (one per line, up to 4)",
                                         lines=3, scale=3, elem_id="kv-prefix-questions")
                x_new = gr.Slider(1, 64, value=12, step=1, label="Answer tokens", scale=1)
            with gr.Row():
                x_btn = gr.Button("Run both ways", variant="primary", elem_id="kv-prefix-btn")
                x_stop = gr.Button("Stop", variant="stop", elem_id="kv-prefix-stop")
            x_text = gr.Markdown(elem_id="kv-prefix-text")
            x_plot = gr.Plot(elem_id="kv-prefix-plot", label="Prefix reuse: time to first token")
        with gr.Tab("5 · What the cache is read for"):
            with gr.Row():
                a_prompt = gr.Textbox(DEFAULT_PROMPT, label="Prompt", lines=2, scale=3,
                                      max_length=settings.max_prompt_chars, elem_id="kv-attn-prompt")
                a_new = gr.Slider(1, 64, value=8, step=1, label="New tokens first", scale=1)
            a_btn = gr.Button("Show attention of the newest token", variant="primary", elem_id="kv-attn-btn")
            with gr.Row():
                a_layer = gr.Slider(0, lm.info.layers - 1, value=0, step=1, label="Layer", elem_id="kv-attn-layer")
                a_head = gr.Slider(0, lm.info.heads - 1, value=0, step=1, label="Query head",
                                   elem_id="kv-attn-head")
            a_plot = gr.Plot(elem_id="kv-attn-plot", label="Attention over the cache")
            a_state = gr.State(None)

    ev = g_btn.click(guarded(lambda p, m: growth_frames(lm, settings, p, m)), [g_prompt, g_new],
                     [g_grid, g_bytes, g_formula, g_text], concurrency_id="model", time_limit=180,
                     api_name="kv_growth")
    g_stop.click(None, None, None, cancels=[ev])
    ev = r_btn.click(guarded(lambda p, n: race_frames(lm, settings, p, n)), [r_prompt, r_new],
                     [r_plot, r_summary, r_progress], concurrency_id="heavy", concurrency_limit=1,
                     time_limit=300, api_name="kv_race")
    r_stop.click(None, None, None, cancels=[ev])
    proj_inputs, proj_outputs = [p_batch, p_context, p_bpv], [p_context_plot, p_batch_plot, p_gqa, p_table]
    project = guarded(lambda b, c, v: projection_view(lm, b, c, v))
    for control in proj_inputs:
        control.change(project, proj_inputs, proj_outputs)
    ev = x_btn.click(guarded(lambda s, q, n: prefix_frames(lm, settings, s, q, n)),
                     [x_system, x_questions, x_new], [x_plot, x_text], concurrency_id="heavy",
                     concurrency_limit=1, time_limit=240, api_name="kv_prefix")
    x_stop.click(None, None, None, cancels=[ev])

    def show_attention(p, n, layer, head):
        view = attention_run(lm, settings, p, n)
        return view, attention_redraw(lm, view, layer, head)

    a_btn.click(guarded(show_attention), [a_prompt, a_new, a_layer, a_head], [a_state, a_plot],
                concurrency_id="model", time_limit=120, api_name="kv_attention")
    redraw = guarded(lambda v, l, h: attention_redraw(lm, v, l, h))
    a_layer.change(redraw, [a_state, a_layer, a_head], a_plot)
    a_head.change(redraw, [a_state, a_layer, a_head], a_plot)
