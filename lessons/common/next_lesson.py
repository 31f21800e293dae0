"""The path through the app: under each lesson, the words it uses (defined on the same screen)
and a button to the next lesson, which switches the tab and scrolls back up to the tab strip."""
from __future__ import annotations

import gradio as gr

from visualizations.glossary import lesson_words_md

# tab id -> (the terms its text uses first, the next tab's id, its label, what it shows)
PATH: dict[str, tuple[list[str], str | None, str, str]] = {
    "start": (["token", "forward", "kv"], "chat", "Try it",
              "ask the model something and watch the answer stream in"),
    "chat": (["ttft", "tpot", "greedy", "token"], "tokens", "1 · Tokens",
             "what the model actually reads"),
    "tokens": (["token", "dtype"], "prefill", "2 · Prefill", "the whole prompt in one pass"),
    "prefill": (["forward", "ttft", "dtype", "o1"], "decode", "3 · Decode",
                "the answer, one token at a time"),
    "decode": (["greedy", "tpot", "kv", "forward"], "kv", "4 · KV cache",
               "why each step only needs the new token"),
    "kv": (["kv", "kvheads", "headdim", "gqa", "o1"], "batching", "5 · Batching",
           "many requests, one pass over the weights"),
    "batching": (["batch", "p95", "tpot", "roofline"], "quantization", "6 · Quantization",
                 "fewer bytes per weight"),
    "quantization": (["dtype", "gguf", "q4", "kl", "roofline", "kernel"], "machine",
                     "This machine", "this machine's own speed limit"),
    "machine": (["roofline", "kernel", "dispatch", "cudagraph", "dtype"], None, "", ""),
}


def lesson_footer(tab_id: str, tabs: gr.Tabs) -> None:
    """The words of lesson `tab_id` and its "next lesson" button (which selects `tabs`' next
    tab). Call inside that lesson's tab."""
    words, nxt, label, what = PATH[tab_id]
    with gr.Accordion("Words in this lesson", open=False, elem_classes=["lab-words"]):
        gr.Markdown(lesson_words_md(words) + "\n\nAll of them: the **Glossary** tab.")
    if nxt is None:
        gr.Markdown("**That was the last lesson.** Go back to any tab above to run it again, or "
                    "read the **Glossary**.", elem_classes=["lab-next"])
        return
    button = gr.Button(f"Next lesson → {label}: {what}", variant="secondary",
                       elem_id=f"next-{tab_id}", elem_classes=["lab-next"])
    button.click(lambda: gr.Tabs(selected=nxt), None, tabs, scroll_to_output=True, queue=False,
                 api_visibility="private")


STARTERS = [
    "Explain why the sky is blue in two sentences.",
    "What is 1234 * 5678?",
    "Translate to French: The cat sleeps on the warm windowsill.",
    "def fibonacci(n):",
    "Tell me a story about a robot 🤖 who loves gardening 🌱",
]


def start_prompts() -> list[gr.Button]:
    """The example prompts of "Start here", as buttons (wired by `wire_start_prompts`)."""
    gr.Markdown("**Your first step:** tap a prompt. It opens **Try it** with the prompt filled "
                "in; press **Generate** there and watch the answer stream.")
    with gr.Row(elem_id="start-prompts"):
        return [gr.Button(p, size="sm", elem_classes=["lab-starter"]) for p in STARTERS]


def wire_start_prompts(buttons: list[gr.Button], prompt: gr.Textbox, tabs: gr.Tabs) -> None:
    """Each button fills the 'Try it' prompt with its text and switches to that tab."""
    for button, text in zip(buttons, STARTERS):
        button.click(lambda t=text: (t, gr.Tabs(selected="chat")), None, [prompt, tabs],
                     scroll_to_output=True, queue=False, api_visibility="private")
