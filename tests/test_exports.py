"""The exports: each sweep's CSV holds exactly the chart's numbers, and the machine summary
says what was measured (busy and impossible figures marked, never copied as results)."""
from __future__ import annotations

import csv
import io
import re
from types import SimpleNamespace

import pytest

from visualizations.exports import (
    batch_sweep_csv,
    machine_figures_md,
    prefill_sweep_csv,
    write_csv,
)


def _prefill_points():
    from inference.experiments.prefill_sweep import PrefillPoint
    return [PrefillPoint(8, 0.0213, 0.5901, True), PrefillPoint(512, 0.9, 36.5, False)]


def _batch_points():
    from inference.experiments.batch_sweep import BatchPoint
    return [BatchPoint(b, 20, 0.05 * b, 0.07 + 0.002 * b, (0.07,), 1000 * b, 538_000_000)
            for b in (1, 2, 4)]


def test_prefill_csv_matches_the_chart():
    from visualizations.style import info_caption
    from visualizations.timing_charts import prefill_sweep_figure

    points = _prefill_points()
    rows = list(csv.DictReader(io.StringIO(prefill_sweep_csv(points))))
    fig = prefill_sweep_figure(points, info_caption(SimpleNamespace(
        device="cpu", dtype="float32", threads=2)))
    plotted = {(int(x), round(float(y), 4)) for t in fig.data for x, y in zip(t.x, t.y)}
    for row, p in zip(rows, points, strict=True):
        assert int(row["prompt_tokens"]) == p.tokens
        assert float(row["one_pass_ms"]) == pytest.approx(p.parallel_seconds * 1000)
        assert float(row["one_at_a_time_ms"]) == pytest.approx(p.sequential_seconds * 1000)
        for col in ("one_pass_ms", "one_at_a_time_ms"):  # every CSV value is a drawn point
            assert (p.tokens, round(float(row[col]), 4)) in plotted, (row, plotted)
    assert rows[1]["one_at_a_time_measured"] == "extrapolated"


def test_batch_csv_matches_the_chart():
    from visualizations.batching_charts import throughput_chart

    points = _batch_points()
    rows = list(csv.DictReader(io.StringIO(batch_sweep_csv(points))))
    assert [int(r["batch"]) for r in rows] == [1, 2, 4]
    fig = throughput_chart(points)
    plotted = [float(y) for trace in fig.data for y in (trace.y or ())]
    for row, p in zip(rows, points, strict=True):
        assert float(row["tokens_per_s"]) == pytest.approx(p.tokens_per_s, rel=1e-4)
        assert any(float(row["tokens_per_s"]) == pytest.approx(y, rel=1e-3) for y in plotted)


def test_csv_file_and_machine_summary(tmp_path):
    from inference.experiments.roofline import Roofline

    path = write_csv("a,b\n1,2\n", "prefill sweep/../x")
    assert re.search(r"prefill-sweep-x-[0-9a-f]{8}\.csv$", path)
    assert open(path).read() == "a,b\n1,2\n"
    info = SimpleNamespace(name="SmolLM2-135M-Instruct", parameters=134_515_008,
                           weight_bytes=538_000_000, dtype="float32", device="cpu", threads=2)
    empty = machine_figures_md(info)
    assert "cpu, 2 threads" in empty and "Nothing measured yet" in empty
    md = machine_figures_md(info, Roofline(22.5, 541_000_000, 13.6), _prefill_points(),
                            _batch_points(), when="today")
    assert "22.5 GB/s" in md and "41.6 tokens/s" in md and "13.6 tokens/s" in md
    assert "Prefill of 512 tokens" in md and "(extrapolated)" in md
    assert "Decode at batch 4" in md and "Nothing measured" not in md
    busy = machine_figures_md(info, Roofline(22.5, 541_000_000, 13.6), busy=True)
    assert "13.6 tokens/s (measured, on a busy machine: noisy, no share" in busy
    assert "%" not in busy.split("Decode at batch 1")[1]
    past = machine_figures_md(info, Roofline(22.5, 541_000_000, 90.0))  # ceiling 41.6
    assert "Decode at batch 1: not a possible result" in past and "90.0" not in past.split(
        "Decode at batch 1")[1].split("(")[0]
