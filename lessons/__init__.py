"""The app's tabs, in order: the one list `app.py` builds the page from. A tab is two files:
`lessons/<module>_panel.py` (Gradio layout and wiring, `build(ctx)`) and
`lessons/<module>_handlers.py` (plain functions: records in, records out). No panel is
imported here, so the common modules can read the list without reaching any tab."""
from __future__ import annotations

from typing import NamedTuple


class Tab(NamedTuple):
    id: str  # the tab's id, also in links (?lesson=kv)
    label: str  # the tab's title on the tab strip
    module: str  # lessons/<module>_panel.py and lessons/<module>_handlers.py
    next: str | None = None  # the id of the tab its "Next lesson" button opens
    words: tuple[str, ...] = ()  # glossary terms its text uses first (a footer when not empty)
    teaser: str = ""  # what it shows, on the previous tab's "Next lesson" button
    prompt_boxes: tuple[str, ...] = ()  # elem_ids a link's prompt fills (its main prompt first)
    text: str = ""  # assets/<text>: the lesson's text, drawn above its panel by app.py

    @property
    def panel(self) -> str:
        return f"lessons.{self.module}_panel"

    @property
    def handlers(self) -> str:
        return f"lessons.{self.module}_handlers"


TABS: tuple[Tab, ...] = (
    Tab("start", "Start here", "start", "chat", ("token", "forward", "kv")),
    Tab("chat", "Try it", "chat", "tokens", ("ttft", "tpot", "greedy", "token"),
        "ask the model something and watch the answer stream in", ("chat-prompt",)),
    Tab("tokens", "1 · Tokens", "tokens", "prefill", ("token", "dtype"),
        "what the model actually reads", ("tok-text",), text="lesson1_tokens.md"),
    Tab("prefill", "2 · Prefill", "prefill", "decode", ("forward", "ttft", "dtype", "o1"),
        "the whole prompt in one pass", ("prefill-prompt",), text="lesson2_prefill.md"),
    Tab("decode", "3 · Decode", "decode", "speculative",
        ("greedy", "tpot", "kv", "forward", "synced"),
        "the answer, one token at a time", ("decode-prompt",), text="lesson3_decode.md"),
    Tab("speculative", "3b · Speculative", "speculative", "kv",
        ("speculative", "draft", "verify", "acceptance"),
        "guess several tokens, check them all in one pass", ("spec-prompt",),
        text="lesson3b_speculative.md"),
    Tab("kv", "4 · KV cache", "kv_cache", "pages", ("kv", "kvheads", "headdim", "gqa", "o1"),
        "why each step only needs the new token",
        ("kv-growth-prompt", "kv-race-prompt", "kv-attn-prompt"), text="lesson4_kv_cache.md"),
    Tab("pages", "4b · KV pages", "pages", "context",
        ("block", "blocktable", "fragmentation", "prefixcache", "preemption"),
        "how a server keeps many caches in shared, reusable blocks", ("pages-prompt",),
        text="lesson4b_pages.md"),
    Tab("context", "4c · Long contexts", "context", "batching",
        ("window", "lstar", "eager_sdpa", "flash", "gqa", "kv"),
        "what a long prompt and a long cache cost, up to the model's window",
        text="lesson4c_context.md"),
    Tab("batching", "5 · Batching", "batching", "quantization",
        ("batch", "p95", "tpot", "roofline"), "many requests, one pass over the weights",
        text="lesson5_batching.md"),
    Tab("quantization", "6 · Quantization", "quantization", "machine",
        ("dtype", "gguf", "q4", "kl", "roofline", "kernel", "activations", "simd"),
        "fewer bytes per weight", ("quant-prompt",)),
    Tab("machine", "This machine", "machine", None,
        ("roofline", "flops", "intensity", "ridge", "matmul", "kernel", "dispatch", "cudagraph",
         "dtype", "synced", "simd"),
        "this machine's own speed limit"),
    Tab("present", "Present", "presenter"),
    Tab("glossary", "Glossary", "glossary"),
)
BY_ID: dict[str, Tab] = {t.id: t for t in TABS}
