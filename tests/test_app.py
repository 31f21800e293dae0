"""The app builds without launching: every lesson's tab, the controls and outputs its browser
walk uses, and the named endpoints that the API tests and the benchmark call."""
import gradio as gr

TABS = {  # tab id -> (label, elem_ids that must sit inside that tab)
    "start": ("Start here", set()),
    "chat": ("Try it", {"chat-prompt", "chat-generate", "chat-stop", "chat-stats", "chat-box"}),
    "tokens": ("1 · Tokens", {"tok-text", "tok-template", "tok-view", "tok-counts", "tok-cost"}),
    "prefill": ("2 · Prefill", {"prefill-prompt", "prefill-run", "prefill-result",
                                "prefill-sweep", "prefill-progress", "prefill-chart"}),
    "decode": ("3 · Decode", {"decode-prompt", "decode-step", "decode-play", "decode-pause",
                              "decode-stop", "decode-reset", "decode-stats", "decode-output",
                              "decode-candidates", "decode-timing", "decode-branch"}),
    "speculative": ("3b · Speculative", {"spec-prompt", "spec-draft", "spec-k", "spec-guess",
                                         "spec-race", "spec-stop", "spec-cards",
                                         "spec-passes-box", "spec-sweep", "spec-sweep-chart",
                                         "spec-batch", "spec-batch-chart"}),
    "kv": ("4 · KV cache", {"kv-growth-btn", "kv-growth-bytes", "kv-growth-grid", "kv-race-btn",
                            "kv-race-plot", "kv-prefix-btn", "kv-prefix-plot", "kv-attn-btn",
                            "kv-attn-plot", "kv-projection-table"}),
    "pages": ("4b · KV pages", {"pages-prompt", "pages-blocks", "pages-add", "pages-step",
                                "pages-finish", "pages-shared", "pages-fill", "pages-reset",
                                "pages-story", "pages-grid", "pages-tables", "pages-bytes"}),
    "context": ("4c · Long contexts", {"ctx-longest", "ctx-prefill-btn", "ctx-prefill-stop",
                                       "ctx-prefill-progress", "ctx-prefill-chart",
                                       "ctx-decode-guess", "ctx-decode-btn", "ctx-decode-chart",
                                       "ctx-memory-btn", "ctx-memory-chart", "ctx-cuts"}),
    "batching": ("5 · Batching", {"batch-sweep-btn", "batch-sweep-table", "batch-sched-btn",
                                  "batch-sched-table", "batch-pad-btn", "batch-pad-plot",
                                  "batch-cost-table", "batch-sweep-diagram", "batch-cards"}),
    "quantization": ("6 · Quantization", {"quant-modes", "quant-run", "quant-progress",
                                          "quant-bars", "quant-table", "quant-diagram",
                                          "quant-cards"}),
    "machine": ("This machine", {"perf-run", "perf-result", "perf-chart", "perf-compute",
                                 "perf-compute-chart", "perf-step", "perf-step-chart",
                                 "perf-sizes", "perf-gpu", "server-pool",
                                 "server-pool-tables", "server-pool-bytes"}),
}
ENDPOINTS = {  # named endpoints (gradio_client, tests/test_bad_input.py, bench/run.py)
    "chat", "tokenize", "token_cost", "prefill_measure", "prefill_sweep",
    "decode_step", "decode_stop", "decode_reset", "decode_branch",
    "kv_growth", "kv_race", "kv_prefix", "kv_attention",
    "pages_add", "pages_step", "pages_finish", "pages_shared", "pages_fill", "pages_reset",
    "context_prefill", "context_decode", "context_memory",
    "speculative_race", "speculative_sweep", "speculative_batch", "speculative_sampled",
    "batch_sweep", "batch_schedulers", "batch_padding", "quant_compare", "roofline",
    "server_stats",
}


def descendants(block):
    for child in getattr(block, "children", None) or []:
        yield child
        yield from descendants(child)


def test_app_builds_with_all_tabs(app_module):
    demo = app_module.demo
    assert isinstance(demo, gr.Blocks)
    tabs = {b.id: b for b in demo.blocks.values() if isinstance(b, gr.Tab)}
    assert set(tabs) >= set(TABS), set(TABS) - set(tabs)
    for tab_id, (label, elem_ids) in TABS.items():
        tab = tabs[tab_id]
        assert tab.label == label
        inside = list(descendants(tab))
        assert inside, f"tab {tab_id!r} is empty"
        found = {getattr(b, "elem_id", None) for b in inside}
        assert elem_ids <= found, f"tab {tab_id!r} lacks {sorted(elem_ids - found)}"
    assert any(getattr(b, "elem_id", None) == "model-card" for b in demo.blocks.values())
    opts = app_module.launch_options()
    assert opts["server_name"] == "127.0.0.1" and opts["share"] is False


def test_named_endpoints_exist(app_module):
    named = {f.api_name for f in app_module.demo.fns.values() if f.api_name}
    assert ENDPOINTS <= named, sorted(ENDPOINTS - named)
    # one endpoint per action: Gradio names a second registration of "x" as "x_1"
    copies = sorted(n for n in named if n.rpartition("_")[2].isdigit()
                    and n.rpartition("_")[0] in ENDPOINTS)
    assert not copies, copies
