"""'This machine': the roofline. Measure the memory bandwidth here, decode a few tokens, and
see how close decode comes to the ceiling that bandwidth sets (bandwidth ÷ bytes per token)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import gradio as gr

from inference.config import Settings
from inference.generation import stream
from inference.experiments.roofline import Roofline, measure_read_bandwidth
from inference.tokens import prompt_ids
from visualizations.model_card import human_bytes
from visualizations.quant_charts import roofline_figure
from visualizations.style import empty_figure, machine_caption

from .feedback import user_error


@dataclass(frozen=True)
class RooflinePoint:
    """One measured point for `roofline_figure` (the same fields a quantization report has)."""

    key: str
    label: str
    kernel: str
    bytes_per_token: int
    decode_tokens_per_s: float


def measure_roofline(lm, new_tokens: int = 24) -> Roofline:
    """Measured read bandwidth and batch-1 decode speed, with the bytes one step reads."""
    bandwidth = measure_read_bandwidth(lm.device)
    ids = prompt_ids(lm.tokenizer, "Write a short story about a lighthouse keeper and a storm.")
    events = list(stream(lm, ids, max_new_tokens=new_tokens))[1:]
    rate = 1 / statistics.median(e.seconds for e in events)
    cache = statistics.mean(e.cache_bytes for e in events)
    return Roofline(bandwidth_gbs=bandwidth, bytes_per_token=int(lm.info.weight_bytes + cache),
                    measured_tokens_per_s=rate)


def roofline_markdown(r: Roofline, info) -> str:
    return (
        f"- **Memory bandwidth (measured):** {r.bandwidth_gbs:.1f} GB/s, reading a 512 MB buffer.\n"
        f"- **Bytes read per decode step:** {human_bytes(r.bytes_per_token)} "
        f"(all {human_bytes(info.weight_bytes)} of weights + the KV cache).\n"
        f"- **Ceiling (theoretical):** {r.bandwidth_gbs:.1f} GB/s ÷ {human_bytes(r.bytes_per_token)} "
        f"= **{r.ceiling_tokens_per_s:.1f} tokens/s** at batch 1.\n"
        f"- **Decode speed (measured, median step):** **{r.measured_tokens_per_s:.1f} tokens/s**, "
        f"**{r.fraction:.0%}** of the ceiling.\n\n"
        "Decode cannot beat the ceiling: every step must stream all the weights from memory. "
        "The gap is time spent on other things (attention, small kernels, matrix-vector "
        "products that do not reach full bandwidth). Other visitors' requests share these "
        "cores, so every figure here rises and falls with the load.")


def build(lm, settings: Settings, shared=None) -> None:
    gr.Markdown("## This machine's roofline\nHow fast *can* decode be here? Measure the memory "
                "bandwidth, then see where this model's measured decode speed sits under it.")
    run = gr.Button("Measure this machine", variant="primary", elem_id="perf-run")
    text = gr.Markdown("*Press the button: it takes a few seconds.*", elem_id="perf-result")
    chart = gr.Plot(empty_figure("The roofline appears here after measuring."), label="Roofline",
                    elem_id="perf-chart")

    def on_run():
        try:
            r = measure_roofline(lm)
            info = lm.info
            point = RooflinePoint(info.dtype, f"{info.name} ({info.dtype})", "PyTorch",
                                  r.bytes_per_token, r.measured_tokens_per_s)
            fig = roofline_figure([point], r.bandwidth_gbs, ", read bandwidth measured",
                                  machine_caption(info.device, info.dtype, info.threads))
            return roofline_markdown(r, info), fig
        except Exception as exc:
            raise user_error(exc) from exc

    run.click(on_run, None, [text, chart], concurrency_id="heavy", concurrency_limit=1,
              time_limit=120, api_name="roofline")
