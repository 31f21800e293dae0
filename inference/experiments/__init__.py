"""Per-lesson measurements built on the engine: sweeps, races, schedulers on a virtual clock,
quality, the roofline, projections and costs.

Each module imports the engine (`inference.*`); the engine never imports these, and these import
no UI. A tab's handlers (`lessons/<tab>_handlers.py`) call an experiment, get frozen records
back, and hand them to `visualizations/`; the bench and the GPU check call the same functions.
"""
