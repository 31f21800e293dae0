"""README's "What to expect" table, written from one results file: one run, one machine, its
date in the heading, and "not measured in this run" for a figure it lacks (never an older one).
`make bench` rewrites it; `python -m bench.readme_table [results.json]` does so by hand.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from bench.targets import dotted_value
from bench.workloads import ROOT

BEGIN, END = "<!-- bench-table:begin -->", "<!-- bench-table:end -->"
MISSING = "not measured in this run"


def _decode(r: dict) -> str | None:
    engine = dotted_value(r, "decode.engine_tokens_per_s")
    generate = dotted_value(r, "decode.generate_tokens_per_s")
    if engine is None or generate is None:
        return None
    roof = dotted_value(r, "decode.roofline_tokens_per_s")
    tail = f"; ceiling {roof:.1f} (theoretical: bandwidth ÷ bytes per token)" if roof else ""
    return f"{engine:.1f} / {generate:.1f} tokens/s{tail}"


def _prefill(r: dict) -> str | None:
    rows = r.get("prefill") or []
    if not rows:
        return None
    longest = max(rows, key=lambda row: row["tokens"])
    return (f"{longest['tokens']:,} tokens in {longest['seconds']:.2f} s "
            f"({longest['tokens_per_s']:.0f} tokens/s)")


def _kv(r: dict) -> str | None:
    speedup, new = dotted_value(r, "kv_cache.speedup"), dotted_value(r, "kv_cache.new_tokens")
    if speedup is None:
        return None
    same = "same tokens" if dotted_value(r, "kv_cache.same_tokens") else "tokens differ"
    return f"{speedup:.2f}× faster over {new} new tokens, {same}"


def _batching(r: dict) -> str | None:
    sizes = dotted_value(r, "batching.sizes") or []
    if len(sizes) < 2:
        return None
    one, top = sizes[0], sizes[-1]
    return (f"batch {top['batch']}: {top['tokens_per_s']:.1f} tokens/s against "
            f"{one['tokens_per_s']:.1f} at batch {one['batch']} "
            f"({top['tokens_per_s'] / one['tokens_per_s']:.1f}×)")


def _schedulers(r: dict) -> str | None:
    c = dotted_value(r, "batching.schedulers.continuous")
    s = dotted_value(r, "batching.schedulers.static")
    if not c or not s:
        return None
    return (f"{c['throughput_tokens_per_s']:.1f} / {s['throughput_tokens_per_s']:.1f} tokens/s, "
            f"mean first token {c['mean_ttft_s']:.1f} / {s['mean_ttft_s']:.1f} s")


def _quantization(r: dict) -> str | None:
    modes = [(name, dotted_value(r, f"quantization.{name}.decode_tokens_per_s"))
             for name in ("fp32", "int8", "int4-g32")]
    if any(v is None for _, v in modes):
        return None
    return " / ".join(f"{name} {v:.1f}" for name, v in modes) + " tokens/s"


def _startup(r: dict) -> str | None:
    warm, cold = dotted_value(r, "startup.warm_seconds"), dotted_value(r, "startup.cold_seconds")
    return None if warm is None or cold is None else f"{warm:.0f} s / {cold:.0f} s"


def _class(r: dict) -> str | None:
    b, s = dotted_value(r, "serving.batched"), dotted_value(r, "serving.serial")
    if not b or not s:
        return None
    return (f"{b['tokens_per_s']:.1f} / {s['tokens_per_s']:.1f} tokens/s, "
            f"p95 latency {b['p95_latency_s']:.1f} / {s['p95_latency_s']:.1f} s")


def _workload(w: dict) -> str:
    app, vllm = w.get("app") or {}, w.get("vllm")
    mine = (f"{app.get('tokens_per_s', 0):.1f} tokens/s, p95 latency "
            f"{app.get('p95_latency_s') or 0:.1f} s, p95 first token "
            f"{app.get('p95_ttft_s') or 0:.1f} s, {app.get('errors', 0)} errors")
    if not vllm:
        return f"{mine}; vLLM not run ({w.get('vllm_reason', 'no reason recorded')})"
    return (f"{mine}; vLLM {vllm['tokens_per_s']:.1f} tokens/s, p95 "
            f"{vllm.get('p95_latency_s') or 0:.1f} / {vllm.get('p95_ttft_s') or 0:.1f} s, "
            f"{vllm.get('errors', 0)} errors (throughput "
            f"{w.get('app_vs_vllm_throughput') or 0:.2f}× vLLM's)")


ROWS: tuple[tuple[str, Callable[[dict], str | None]], ...] = (
    ("decode, batch 1 (engine / `generate()`)", _decode),
    ("prefill, the longest prompt measured", _prefill),
    ("KV cache against recomputing every step", _kv),
    ("batching: the largest batch against batch 1", _batching),
    ("continuous / static batching (10-request trace)", _schedulers),
    ("decode by weight format", _quantization),
    ("start-up, weights cached / cold", _startup),
    ("30 streaming chats: continuous batcher / one row at a time", _class),
)


def table(results: dict) -> str:
    """The markdown table, with its heading line."""
    machine = results.get("machine", {})
    lines = [f"Measured by `make bench` on {machine.get('device', 'an unnamed machine')}, "
             f"{machine.get('dtype', 'unknown dtype')}, {results.get('when', 'undated')} "
             "(one run, one machine):", "", "| figure | measured |", "|---|---|"]
    lines += [f"| {label} | {row(results) or MISSING} |" for label, row in ROWS]
    workloads = dotted_value(results, "serving.workloads") or {}
    lines += [f"| serving `{name}`: this app; vLLM on the same machine | {_workload(w)} |"
              for name, w in workloads.items()]
    return "\n".join(lines)


def write_readme(results: dict, readme: Path = ROOT / "README.md") -> bool:
    """Replace the table between the README's markers; False (README untouched) without them."""
    text = readme.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        return False
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    readme.write_text(f"{head}{BEGIN}\n{table(results)}\n{END}{tail}", encoding="utf-8")
    return True


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bench" / "results.json"
    wrote = write_readme(json.loads(path.read_text(encoding="utf-8")))
    print("README table rewritten" if wrote else "README has no bench-table markers")
