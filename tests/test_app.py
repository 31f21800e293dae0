"""The app builds without launching, with every lesson's tab."""


def test_app_builds_with_all_tabs():
    import app
    import gradio as gr

    assert isinstance(app.demo, gr.Blocks)
    tabs = [b.label for b in app.demo.blocks.values() if isinstance(b, gr.Tab)]
    for name in ["Start here", "Try it", "1 · Tokens", "2 · Prefill", "3 · Decode", "4 · KV cache", "This machine",
                 "5 · Batching", "6 · Quantization"]:
        assert name in tabs
    opts = app.launch_options()
    assert opts["server_name"] == "127.0.0.1" and opts["share"] is False
