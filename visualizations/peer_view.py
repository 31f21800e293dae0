"""This app's server beside vLLM serving the same class (`lessons.common.serving_peer`): a
table of what the students saw, the two ratios as plain numbers, and where and when it was
measured. Pure: a `PeerComparison` (read by attribute) in, markdown out."""
from __future__ import annotations

NONE_YET = ("*No comparison with vLLM measured yet: `make bench-serving` measures one on this "
            "machine (vLLM in a venv of its own, the same class sent to both).*")


def peer_comparison_md(c) -> str:
    """The class served by both engines, labelled with its machine and date."""
    if c is None:
        return NONE_YET
    rows = [("this app", c.app), (f"vLLM {c.vllm_version}", c.vllm)]
    table = "\n".join(f"| {name} | **{s.tokens_per_s:.1f}** | {s.p95_latency_s:.1f} s | "
                      f"{s.p95_ttft_s:.1f} s |" for name, s in rows)
    where = (f"Measured on this machine ({c.machine}) at {c.when} by `{c.source}`."
             if c.here else
             f"Recorded on a {c.machine} at {c.when} by `{c.source}`, not measured by this "
             "installation: `make bench-serving` here measures this machine's figures.")
    return (f"{c.clients} students press Generate at once, {c.new_tokens} new tokens each, "
            "greedy, streaming; the same prompts and client code, sent to this app's page and "
            "to vLLM's OpenAI server on the same machine, one after the other. p95: what the "
            "slowest 5% of the students waited.\n\n"
            "| | tokens/s | p95 answer | p95 first token |\n"
            "|---|---|---|---|\n" + table + "\n\n"
            f"This app served **{c.app.tokens_per_s / c.vllm.tokens_per_s:.2f}×** vLLM's tokens "
            f"per second; its slowest 5% waited **{c.app.p95_latency_s / c.vllm.p95_latency_s:.2f}"
            f"×** as long for their whole answer. One run each, with vLLM's CPU backend, on the "
            f"{c.machine}: a comparison on that CPU, not of the engines at their best. On a GPU "
            "vLLM runs its own kernels (attention read through the block table, CUDA graphs), "
            f"and both figures and their ratio change. *{where}*")
