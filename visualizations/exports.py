"""Exports for slides and notes: a chart's data as CSV and this machine's figures as markdown,
built from the records the charts draw, so an export matches the chart (PNG: Plotly's camera)."""
from __future__ import annotations

import atexit
import csv
import hashlib
import io
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterable, Sequence


def csv_text(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    """A CSV table (comma-separated, one header line, Unix newlines)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def prefill_sweep_csv(points) -> str:
    """The prefill sweep chart's data, in its units (ms): one row per prompt length."""
    return csv_text(
        ["prompt_tokens", "one_pass_ms", "one_at_a_time_ms", "one_at_a_time_measured"],
        [[p.tokens, f"{p.parallel_seconds * 1000:.4f}", f"{p.sequential_seconds * 1000:.4f}",
          "yes" if p.sequential_measured else "extrapolated"] for p in points])


def batch_sweep_csv(points) -> str:
    """The batch sweep charts' data: one row per batch size (`BatchPoint`s)."""
    return csv_text(
        ["batch", "prompt_tokens", "step_seconds", "tokens_per_s", "per_request_tokens_per_s",
         "prefill_seconds", "cache_bytes", "weight_bytes"],
        [[p.batch, p.prompt_tokens, f"{p.step_seconds:.6f}", f"{p.tokens_per_s:.3f}",
          f"{p.per_request_tokens_per_s:.3f}", f"{p.prefill_seconds:.6f}", p.cache_bytes,
          p.weight_bytes] for p in points])


_EXPORT_DIR: list[str] = []  # this process's one export folder, made on first use
_EXPORT_LOCK = threading.Lock()


def export_folder() -> str:
    """The one folder every CSV export of this process goes into (removed when it exits)."""
    with _EXPORT_LOCK:
        if not _EXPORT_DIR or not os.path.isdir(_EXPORT_DIR[0]):
            _EXPORT_DIR[:] = [tempfile.mkdtemp(prefix="llm-lab-export-")]
            atexit.register(shutil.rmtree, _EXPORT_DIR[0], True)
        return _EXPORT_DIR[0]


def write_csv(text: str, name: str, keep: int = 32) -> str:
    """Write CSV text to `<name>-<hash of the text>.csv` in the export folder (same text, same
    file: visitors never overwrite each other's) and return its path; the `keep` newest stay."""
    safe = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "data"
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:8]
    folder = export_folder()
    path = os.path.join(folder, f"{safe}-{digest}.csv")
    with _EXPORT_LOCK:
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        files = sorted((os.path.join(folder, n) for n in os.listdir(folder)), key=os.path.getmtime)
        for old in files[:-max(1, keep)]:
            if old != path:
                os.remove(old)
    return path


def machine_figures_md(info, roofline=None, prefill_points=(), batch_points=(),
                       when: str = "", busy: bool = False) -> str:
    """The machine, then each measured figure (not one physics rules out; busy: no share)."""
    lines = [f"## LLM inference measured on this machine{f' ({when})' if when else ''}",
             f"- Model: {info.name}, {info.parameters / 1e6:,.0f} M parameters, "
             f"{info.weight_bytes / 1e6:,.0f} MB of weights in {info.dtype}",
             f"- Machine: {info.device}, {info.threads} threads"]
    if roofline is not None:
        lines += [f"- Memory read bandwidth: {roofline.bandwidth_gbs:.1f} GB/s (measured)",
                  f"- Decode ceiling at batch 1: {roofline.ceiling_tokens_per_s:.1f} tokens/s "
                  f"(theoretical: bandwidth ÷ {roofline.bytes_per_token / 1e6:,.0f} MB per step)"]
        why = getattr(roofline, "impossible", None)
        if roofline.measured_tokens_per_s is not None and why:
            lines.append(f"- Decode at batch 1: not a possible result ({why})")
        elif roofline.measured_tokens_per_s is not None:
            share = ("on a busy machine: noisy, no share of the ceiling" if busy
                     else f"{roofline.fraction:.0%} of the ceiling")
            lines.append(f"- Decode at batch 1: {roofline.measured_tokens_per_s:.1f} tokens/s "
                         f"(measured, {share})")
    lines += [f"- Prefill of {p.tokens} tokens: " + (
        f"not a possible result ({p.impossible})" if getattr(p, "impossible", None) else
        f"{p.parallel_seconds * 1000:,.0f} ms in one pass vs {p.sequential_seconds * 1000:,.0f} ms "
        f"one at a time ({'measured' if p.sequential_measured else 'extrapolated'})")
        for p in prefill_points]
    lines += [f"- Decode at batch {p.batch}: " + (
        f"not a possible result ({p.impossible})" if getattr(p, "impossible", None) else
        f"{p.tokens_per_s:,.1f} tokens/s in all, {p.per_request_tokens_per_s:.1f} per request "
        "(measured)") for p in batch_points]
    if roofline is None and not prefill_points and not batch_points:
        lines.append("- (Nothing measured yet: press *Measure this machine*, or run the prefill "
                     "and batch sweeps.)")
    return "\n".join(lines)
