"""The server view and lesson 5 show this app's server beside vLLM serving the same
class, with the machine and date of the run: this machine's own `make bench-serving` results
where it ran here, else the run recorded in assets/serving_vs_vllm.json, labelled elsewhere."""
from __future__ import annotations

import json

from lessons.common.serving_peer import RECORDED, read_comparison, serving_comparison
from visualizations.server_view import NONE_YET, peer_comparison_md

CPU = "Test CPU 9000"


def results(cpu: str = CPU, when: str = "2026-12-02 07:50:00", app_tps: float = 120.0,
            vllm: dict | None = None) -> dict:
    """A bench results record as `make bench-serving` writes it (hand-made figures)."""
    side = {"tokens_per_s": app_tps, "p95_latency_s": 8.0, "p95_ttft_s": 2.0}
    return {"when": when, "machine": cpu,
            "serving": {"clients": 30, "new_tokens": 48, "batched": side,
                        "vllm": vllm if vllm is not None else {
                            "tokens_per_s": 100.0, "p95_latency_s": 10.0, "p95_ttft_s": 2.5,
                            "version": "0.32.0"}}}


def test_a_results_record_reads_into_both_sides():
    c = read_comparison(results(), here_cpu=CPU)
    assert (c.app.tokens_per_s, c.vllm.tokens_per_s, c.vllm.p95_latency_s) == (120, 100, 10)
    assert (c.clients, c.new_tokens, c.vllm_version, c.here) == (30, 48, "0.32.0", True)
    assert read_comparison(results(), here_cpu="Another CPU").here is False
    assert read_comparison(results(vllm={"skipped": "no vLLM here"}), CPU) is None
    assert read_comparison({"serving": {}}, CPU) is None and read_comparison({}, CPU) is None


def test_make_bench_results_name_their_cpu_in_the_device():
    full = results() | {"machine": {"device": f"cpu ({CPU})", "dtype": "float32"}}
    c = read_comparison(full, here_cpu=CPU, source="make bench")
    assert c.here and c.machine == CPU and c.app.tokens_per_s == 120
    assert f"({CPU}) at 2026-12-02 07:50:00 by `make bench`." in peer_comparison_md(c)
    gpu = results() | {"machine": {"device": "cuda:0 (NVIDIA H200)"}}
    assert not read_comparison(gpu, here_cpu=CPU).here


def test_make_benchs_card_pairs_the_two_engines_timed_by_the_same_client():
    full = results(app_tps=999.0)  # "batched": make bench's own threaded class, another client
    full["serving"]["workloads"] = {"class_30x48": {
        "app": {"tokens_per_s": 130.0, "p95_latency_s": 7.0, "p95_ttft_s": 1.5},
        "vllm": {"tokens_per_s": 110.0, "p95_latency_s": 9.0, "p95_ttft_s": 2.0}}}
    c = read_comparison(full, here_cpu=CPU)
    assert (c.app.tokens_per_s, c.vllm.tokens_per_s, c.vllm.p95_latency_s) == (130, 110, 9)
    full["serving"]["workloads"]["class_30x48"]["vllm"] = None  # vLLM not run there
    assert read_comparison(full, here_cpu=CPU).app.tokens_per_s == 999.0


def test_this_machines_own_run_is_shown_else_the_recorded_one(tmp_path):
    recorded = tmp_path / "recorded.json"
    recorded.write_text(json.dumps(results(cpu=CPU, when="2026-01-01 00:00:00", app_tps=50)))
    mine, older, other = (tmp_path / n for n in ("mine.json", "older.json", "other.json"))
    mine.write_text(json.dumps(results(when="2026-12-02 09:00:00", app_tps=130)))
    older.write_text(json.dumps(results(when="2026-12-01 09:00:00", app_tps=110)))
    other.write_text(json.dumps(results(cpu="Another CPU", app_tps=999)))
    got = serving_comparison((older, mine), recorded, here_cpu=CPU)
    assert got.here and got.app.tokens_per_s == 130  # this machine's newest run
    got = serving_comparison((other,), recorded, here_cpu=CPU)  # another machine's file
    assert not got.here and got.app.tokens_per_s == 50  # the recorded run, labelled elsewhere
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    got = serving_comparison((broken, tmp_path / "missing.json"), recorded, here_cpu=CPU)
    assert not got.here and got.app.tokens_per_s == 50
    assert serving_comparison((broken,), tmp_path / "missing.json", here_cpu=CPU) is None


def test_the_view_says_where_and_when_and_the_ratios_as_numbers():
    here = peer_comparison_md(read_comparison(results(), here_cpu=CPU))
    assert "Measured on this machine (Test CPU 9000) at 2026-12-02 07:50:00" in here
    assert "**1.20×** vLLM's tokens per second" in here and "**0.80×** as long" in here
    assert "| vLLM 0.32.0 | **100.0** | 10.0 s | 2.5 s |" in here
    elsewhere = peer_comparison_md(read_comparison(results(), here_cpu="Another CPU"))
    assert "Recorded on a Test CPU 9000 at 2026-12-02 07:50:00" in elsewhere
    assert "not measured by this installation" in elsewhere
    two_cores = read_comparison(results() | {"cores": 2}, here_cpu=CPU)
    assert two_cores.here and "(2-core Test CPU 9000) at" in peer_comparison_md(two_cores)
    assert "faster" not in here + elsewhere and "slower" not in here + elsewhere
    assert peer_comparison_md(None) == NONE_YET


def test_the_recorded_run_is_a_real_bench_record():
    record = json.loads(RECORDED.read_text())
    c = read_comparison(record)
    assert c is not None and not c.here, "the recorded run must read (and never as 'here')"
    assert c.app.tokens_per_s > 0 and c.vllm.tokens_per_s > 0 and c.clients == 30
    assert record["serving"]["batched"]["errors"] == 0 and record["serving"]["vllm"][
        "errors"] == 0


def test_the_server_view_and_lesson_5_show_it(app_module):
    shown = {b.elem_id: b.value for b in app_module.demo.blocks.values()
             if getattr(b, "elem_id", None) in ("server-vs-vllm", "batch-vs-vllm")}
    assert set(shown) == {"server-vs-vllm", "batch-vs-vllm"}
    for text in shown.values():
        assert "vLLM" in text and "tokens per second" in text
        assert "Measured on this machine" in text or "Recorded on a " in text  # says where
