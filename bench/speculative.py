"""`make bench`'s speculative-decoding section, measured with the lesson's own
functions: the race of each draft against plain greedy decoding on the edit workload, repeated
(the speed-up is the median of the repeats, and the verdict needs every repeat to agree), and
the verification pass's cost at batch 16, from which that batch's speed-up is derived.

    from bench.speculative import measure_speculative
    results["speculative"] = measure_speculative(lm, LIMITS)
"""
from __future__ import annotations

import os
import statistics

import torch

from inference.drafts import make_draft
from inference.experiments.shared_results import SharedResults
from inference.experiments.speculative_batch import batch_interplay
from inference.experiments.speculative_race import (
    DEFAULT_SPEC_PROMPT,
    SpecRaceSummary,
    run_race,
    spec_prompt,
    speed_verdict,
)
from inference.tokens import prompt_ids


def race_figures(runs: list[SpecRaceSummary]) -> dict:
    """The bench's keys for one draft: the median run's figures, every repeat's speed-up."""
    speedups = [r.speedup for r in runs]
    mid = sorted(runs, key=lambda r: r.speedup)[len(runs) // 2]
    return {"acceptance": mid.acceptance, "tokens_per_pass": mid.tokens_per_pass,
            "tokens_per_s": mid.tokens_per_s, "plain_tokens_per_s": mid.plain_tokens_per_s,
            "speedup": statistics.median(speedups),
            "identical": all(r.identical for r in runs),
            "verdict": speed_verdict(speedups, max(r.noise for r in runs)),
            "speedup_runs": speedups, "new_tokens": mid.new_tokens, "passes": mid.passes,
            "draft_seconds": mid.draft_seconds, "spec_seconds": mid.spec_seconds,
            "ceiling_tokens_per_s": mid.ceiling_tokens_per_s}


def measure_speculative(lm, settings, repeats: int = 3) -> dict:
    """Race prompt lookup and the draft model (`settings.spec_draft`) at k =
    `settings.spec_k.default` on the edit workload; time the verification pass at batch 16."""
    shared = SharedResults()
    ids = prompt_ids(lm.tokenizer, spec_prompt(DEFAULT_SPEC_PROMPT))
    k, new = int(settings.spec_k.default), int(settings.spec_new_tokens.default)
    out: dict = {"workload": DEFAULT_SPEC_PROMPT, "k": k, "prompt_tokens": len(ids),
                 "threads": torch.get_num_threads(), "load_average_1min": os.getloadavg()[0]}
    for name, key in (("prompt_lookup", "prompt_lookup"), ("draft_model", settings.spec_draft)):
        draft = make_draft(lm, key, shared)
        out[name] = race_figures([run_race(lm, ids, draft, k, new, shared)
                                  for _ in range(repeats)])
    out["draft_model"]["draft"] = settings.spec_draft
    *_, done = batch_interplay(lm, ids, k, (1, 16), shared=shared)
    tpp = out["prompt_lookup"]["tokens_per_pass"]
    for c in done.costs:
        out[f"batch{c.batch}"] = {
            "speedup": c.derived_speedup(tpp), "speedup_how": "derived: prompt lookup's "
            "batch-1 tokens per pass x plain step / verification pass, both timed at this batch",
            "plain_step_seconds": c.plain_seconds, "verify_seconds": c.verify_seconds,
            "cost_ratio": c.cost_ratio, "plain_bound": c.plain_bound,
            "verify_bound": c.verify_bound}
    out["load_average_1min_end"] = os.getloadavg()[0]
    return out


if __name__ == "__main__":
    import json

    from inference.config import LIMITS
    from inference.loading import load_model

    print(json.dumps(measure_speculative(load_model(), LIMITS), indent=1))
