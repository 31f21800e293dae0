"""Every job and step `inference/compute_thread.py` times, logged as it ends: (sign, seconds),
sign > 0 for a measurement job (1 / its weight), -1 for a server step.

The log errs on the side the fairness tests bound: a job is timed inside `ComputeTurns`' own
clock (at most what it counted), a step around it (at least what it credited). Timed the other
way, a busy machine's thread switches landed in a job's seconds and failed a bound that held."""
from __future__ import annotations

import time


def log_turns(srv, log: list) -> None:
    """Append each of `srv`'s timed jobs and steps to `log`."""
    real_timed = srv.turns._timed

    def logged(fn, sign):
        def run(*args):
            start = time.perf_counter()
            try:
                return fn(*args)
            finally:
                log.append((sign, time.perf_counter() - start))
        return run

    def timed(fn, args, sign):
        if sign > 0:
            return real_timed(logged(fn, sign), args, sign)
        return logged(real_timed, sign)(fn, args, sign)

    srv.turns._timed = timed
