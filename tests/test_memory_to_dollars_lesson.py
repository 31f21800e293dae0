"""Lesson 5's chain from KV memory to dollars on the real model: after a small sweep, the cost
tab's section carries this machine's chain, its rate and dollars the cost table's own row for
the batch that fits; without a sweep, the empty state beside the published (theoretical) rows."""
from inference.config import Settings
from inference.experiments.serving_cost import model_serving_costs
from inference.experiments.shared_results import SharedResults
from inference.kv_cache import bytes_per_token
from lessons import batching_handlers as run

SETTINGS = Settings()


def test_the_cost_tab_chains_memory_to_dollars_from_the_sweep(lm):
    frames = list(run.sweep_frames(lm, SETTINGS, SharedResults(), max_batch=2, steps=2,
                                   budget_mb=None))
    sweep = frames[-1].sweep
    view = run.cost_view(lm, SETTINGS, sweep, price_per_hour=1.0, prompt_tokens=10,
                         output_tokens=20)
    costs = model_serving_costs(lm, sweep.points, 1.0, 10, 20, sweep.bandwidth_gbs)
    info = lm.info
    kv = bytes_per_token(info.layers, info.kv_heads, info.head_dim, lm.bytes_per_value)
    fits = int((sweep.plans[0].budget_bytes - sweep.points[0].weight_bytes) // (kv * 30))
    chosen = max((c for c in costs if c.batch <= fits), key=lambda c: c.batch)
    assert f"**{fits:,} sequences fit**" in view.chain
    rate = f"**{chosen.output_tokens_per_s:,.1f} tokens/s** (the cost table's rate: measured"
    assert rate in view.chain
    assert "Llama-3-8B" in view.chain and "theoretical" in view.chain
    empty = run.cost_view(lm, SETTINGS, None, price_per_hour=1.0, prompt_tokens=10,
                          output_tokens=20)
    assert "Run the batch sweep (tab 1)" in empty.chain and "| 232 |" in empty.chain
