"""The app's lesson panels: one module per lesson, each with `build(lm)` that lays out its
controls and wires its events inside the caller's `gr.Tab`. Handlers are plain functions
that call `inference/` and draw with `visualizations/`."""
