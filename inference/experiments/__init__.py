"""Per-lesson measurements built on the engine: sweeps, races, schedulers on a virtual clock,
quality, the roofline, projections and costs. They import the engine, never the UI; the
engine never imports them. Handlers, the bench and the GPU check call the same functions.
"""

WARM_UP_TOKENS = 8  # an experiment's untimed warm-up pass: at most this many tokens
WARM_UP_PASSES = 4  # its warm-ups: `fastest_threads` times 2 thread counts twice (or untimed)
