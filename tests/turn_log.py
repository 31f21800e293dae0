"""Every job and step `inference/compute_turns.py` times, logged as it ends: (sign, seconds),
sign > 0 for a measurement job (1 / its weight), -1 for a server step."""
from __future__ import annotations

import time


def log_turns(srv, log: list) -> None:
    """Append each of `srv`'s timed jobs and steps to `log`, timed around its own clock."""
    real_timed = srv.turns._timed

    def timed(fn, args, sign):
        start = time.perf_counter()
        try:
            return real_timed(fn, args, sign)
        finally:
            log.append((sign, time.perf_counter() - start))

    srv.turns._timed = timed
