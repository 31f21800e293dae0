"""From KV memory to dollars on hand-made numbers: sequences that fit, the chain on this
machine's cost rows (measured) and on a published GPU (theoretical), the levers together; and
the section's text for hand-made chains."""
import pytest

from inference.experiments import serving_cost as dollars
from inference.experiments.kv_projection import ModelSpec
from inference.experiments.serving_cost import (
    CostPoint,
    Gpu,
    gpu_chain,
    levers,
    measured_chain,
    roofline_step,
    sequences_that_fit,
)
from visualizations.batching_text import NO_CHAIN, chain_md, levers_md, measured_chain_md

# a toy model: 1 layer, 1 KV head of 4 dims, 10^9 parameters; KV per token = 2×1×1×4×2 = 16 B
TOY = ModelSpec("Toy-1B", 1, 1, 1, 4, 10**9, "hand-made", 4_096)
# a toy GPU: 10 GB, 1,000 GB/s, 1,000 TFLOPS, $3.60 per hour
GPU = Gpu("Toy GPU", 10 * 10**9, 1_000.0, 1_000.0, 3.60, "hand-made")


def cost(batch: int, rate: float, conversation: float) -> CostPoint:
    return CostPoint(batch=batch, output_tokens_per_s=rate,
                     usd_per_million_output=0.1 / (rate * 3600) * 1e6, usd_per_million_input=0,
                     seconds_per_conversation=0, usd_per_conversation=conversation,
                     conversations_per_hour=0, measured_output_tokens_per_s=rate)


def test_sequences_that_fit_divide_the_memory_left_by_one_sequence():
    assert sequences_that_fit(10e9, 2e9, 1_000, 1_000) == 8_000  # 8 GB ÷ 1 MB
    assert sequences_that_fit(10e9, 2e9, 1_000, 3_000) == 2_666  # rounded down
    assert sequences_that_fit(10e9, 10e9, 1_000, 1_000) == 0  # the weights fill it
    assert sequences_that_fit(10e9, 12e9, 1_000, 1_000) == 0


def test_the_measured_chain_takes_the_largest_measured_batch_that_fits():
    costs = [cost(1, 10.0, 0.01), cost(8, 60.0, 0.002), cost(32, 150.0, 0.001)]
    # 1 GB budget − 0.5 GB weights = 0.5 GB ÷ (46,080 B × 500) = 21 sequences: batch 8
    c = measured_chain(costs, 1e9, 0.5e9, 46_080, 200, 300, 0.1, "here")
    assert (c.fits, c.batch, c.tokens_per_s, c.usd_per_conversation) == (21, 8, 60.0, 0.002)
    assert c.kind == "measured" and c.largest_measured == 32
    roomy = measured_chain(costs, 100e9, 0.5e9, 46_080, 200, 300, 0.1, "here")
    assert roomy.fits > 32 and roomy.batch == 32  # more fit than were measured
    tight = measured_chain(costs, 0.5e9, 0.5e9, 46_080, 200, 300, 0.1, "here")
    assert tight.fits == 0 and tight.batch == 0
    assert measured_chain([], 1e9, 0.5e9, 46_080, 200, 300, 0.1, "here") is None


def test_the_roofline_step_takes_the_slower_of_bytes_and_flops():
    # batch 1, no context: 2 GB of weights ÷ 1,000 GB/s = 2 ms; 2 GFLOP ÷ 1,000 TFLOPS = 2 µs
    assert roofline_step(TOY, GPU, 1, 0) == (pytest.approx(0.002), "memory")
    # batch 10,000: 2 × 10^13 FLOPs ÷ 10^15 FLOP/s = 20 ms, more than 2 ms of weights
    s, bound = roofline_step(TOY, GPU, 10_000, 0)
    assert bound == "compute" and s == pytest.approx(0.020)


def test_the_gpu_chain_goes_from_memory_to_dollars():
    c = gpu_chain(TOY, GPU, prompt_tokens=500, output_tokens=500, batch=1)
    # (10 GB − 2 GB) ÷ (16 B × 1,000 tokens) = 500,000 sequences fit; batch 1 at context 750
    assert c.fits == 500_000 and c.batch == 1 and c.kind == "theoretical"
    step = (2e9 + 16 * 750) / 1e12
    assert c.tokens_per_s == pytest.approx(1 / step)
    assert c.usd_per_million == pytest.approx(3.6 / (c.tokens_per_s * 3600) * 1e6)
    prefill = 500 / (1e15 / 2e9)
    assert c.usd_per_conversation == pytest.approx(3.6 * (prefill + 500 / c.tokens_per_s) / 3600)
    assert gpu_chain(TOY, GPU, weight_bytes_per_value=10).batch == 0  # 10 GB of weights


def test_llama_3_8b_at_4k_on_an_h200_fits_232_sequences():
    c = gpu_chain(dollars.LEVER_MODEL, dollars.H200)
    assert c.kv_bytes_per_token == 131_072 and c.fits == 232 and c.bound == "memory"
    assert c.tokens_per_s < dollars.cache_bound_tokens_per_s(dollars.LEVER_MODEL, dollars.H200,
                                                             3_584)


def test_each_lever_makes_a_conversation_cheaper():
    rows = levers()
    costs = [r.usd_per_conversation for r in rows]
    assert costs == sorted(costs, reverse=True) and len(set(costs)) == len(costs)
    assert rows[0].batch == 1 and rows[1].batch == rows[1].fits
    assert rows[2].fits > rows[1].fits  # int8 weights leave more room for caches
    assert rows[4].fits >= 2 * rows[3].fits  # an 8-bit cache holds twice the sequences


def test_the_section_reads_the_chain_and_says_which_numbers_are_measured():
    costs = [cost(1, 10.0, 0.01), cost(8, 60.0, 0.002), cost(32, 150.0, 0.001)]
    c = measured_chain(costs, 1e9, 0.5e9, 46_080, 200, 300, 0.1, "here")
    md = measured_chain_md(c)
    assert "**21 sequences fit**" in md and "largest measured one that fits, 8" in md
    assert "**60.0 tokens/s** (the cost table's rate: measured" in md
    assert "$0.00200 per conversation" in md
    roomy = measured_chain_md(measured_chain(costs, 100e9, 0.5e9, 46_080, 200, 300, 0.1, "x"))
    assert "more than the sweep measured" in roomy and "batch's, 32" in roomy
    assert measured_chain_md(None) == NO_CHAIN
    assert measured_chain_md(c, "cpu · float32").startswith("**This machine** (cpu · float32):")
    whole = chain_md(None, dollars.published_chains(), dollars.H200.source, levers(),
                     "Llama-3-8B", 10_218.0)
    assert "Run the batch sweep" in whole and "theoretical" in whole
    assert "| Llama-3-70B |" in whole and "weights do not fit" in whole
    assert "| 232 |" in whole and "10,218" in whole
    first = levers()[0].usd_per_conversation
    assert f"{first / levers()[-1].usd_per_conversation:,.1f}×" in levers_md(levers(), "L", 1.0)
