"""Per-lesson measurements built on the engine: sweeps, races, schedulers on a virtual clock,
quality, the roofline, projections and costs.

Each module imports the engine (`inference.*`); the engine never imports these. A lesson panel
calls an experiment, gets frozen records back, and hands them to `visualizations/`.
"""
