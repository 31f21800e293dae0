"""The README's figure table comes from one bench run: its machine and date head it, a figure
the run lacks says so, and only the text between the markers changes."""
from bench.targets import BEGIN, END, MISSING, table, write_readme

RUN = {"when": "2026-12-03 05:00:00",
       "machine": {"device": "cpu (Test CPU)", "dtype": "torch.float32"},
       "decode": {"engine_tokens_per_s": 9.4, "generate_tokens_per_s": 9.7,
                  "roofline_tokens_per_s": 26.7},
       "prefill": [{"tokens": 16, "seconds": 0.1, "tokens_per_s": 160.0},
                   {"tokens": 1024, "seconds": 3.4, "tokens_per_s": 301.2}],
       "kv_cache": {"speedup": 2.95, "new_tokens": 64, "same_tokens": True},
       "batching": {"sizes": [{"batch": 1, "tokens_per_s": 8.1},
                              {"batch": 64, "tokens_per_s": 146.0}]},
       "serving": {"workloads": {
           "class_30x48": {"app": {"tokens_per_s": 169.3, "p95_latency_s": 6.8,
                                   "p95_ttft_s": 1.7, "errors": 0},
                           "vllm": {"tokens_per_s": 153.5, "p95_latency_s": 7.6,
                                    "p95_ttft_s": 1.9, "errors": 0},
                           "app_vs_vllm_throughput": 1.103},
           "arrivals": {"app": {"tokens_per_s": 50.0, "p95_latency_s": 9.0, "p95_ttft_s": 2.0,
                                "errors": 1},
                        "vllm": None, "vllm_reason": "vLLM could not be installed"}}}}


def test_the_table_names_one_machine_and_date_and_reads_each_figure_from_the_run():
    text = table(RUN)
    assert text.splitlines()[0].startswith(
        "Measured by `make bench` on cpu (Test CPU), torch.float32, 2026-12-03 05:00:00")
    assert "| 9.4 / 9.7 tokens/s; ceiling 26.7" in text
    assert "1,024 tokens in 3.40 s (301 tokens/s)" in text
    assert "2.95× faster over 64 new tokens, same tokens" in text
    assert "batch 64: 146.0 tokens/s against 8.1 at batch 1 (18.0×)" in text
    assert ("| serving `class_30x48`: this app; vLLM on the same machine | 169.3 tokens/s, p95 "
            "latency 6.8 s, p95 first token 1.7 s, 0 errors; vLLM 153.5 tokens/s, p95 7.6 / 1.9 s,"
            " 0 errors (throughput 1.10× vLLM's) |") in text
    assert "1 errors; vLLM not run (vLLM could not be installed)" in text
    missing = [line for line in text.splitlines() if MISSING in line]
    assert any("weight format" in line for line in missing)  # no quantization in this run
    assert any("start-up" in line for line in missing)


def test_only_the_text_between_the_markers_is_rewritten(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{BEGIN}\nold table\n{END}\noutro\n", encoding="utf-8")
    assert write_readme(RUN, readme)
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("intro\n" + BEGIN) and text.endswith(END + "\noutro\n")
    assert "old table" not in text and "Test CPU" in text
    plain = tmp_path / "PLAIN.md"
    plain.write_text("no markers\n", encoding="utf-8")
    assert not write_readme(RUN, plain) and plain.read_text(encoding="utf-8") == "no markers\n"
