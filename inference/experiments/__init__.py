"""Per-lesson measurements built on the engine: sweeps, races, schedulers on a virtual clock,
quality, the roofline, projections and costs. They import the engine, never the UI; the
engine never imports them. Handlers, the bench and the GPU check call the same functions.
"""
