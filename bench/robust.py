"""`make bench` section `robust`: do the four headline figures (KV race, batch gain, one-pass
prefill, int4 speed) survive a busy machine? Each is measured with the lessons' noise-proof
functions quiet, then beside a spinning core and beside 30 chats (`TARGETS` says how close).
Run alone: `python -m bench.robust`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from bench.app_server import start_app
from bench.classroom import Student, chat_stream
from bench.clients import chat_fn_index
from bench.measure import KV_PROMPT, PROMPT
from inference.experiments import noise, quiet_reference
from inference.experiments.batch_sweep import run_sweep
from inference.experiments.kv_race import checked_race, summarize
from inference.experiments.noise import Robust
from inference.experiments.prefill_sweep import prefill_sweep
from inference.experiments.quality import checked_speed_race
from inference.experiments.roofline import measure_read_bandwidth
from inference.experiments.shared_results import SharedResults
from inference.loading import load_model
from inference.quantize import build_mode
from inference.tokens import prompt_ids

LOADS = ("spinner", "chats")
SPIN = "import sys\nprint('spinning', flush=True)\nwhile True: pass\n"  # one core, busy


@dataclass(frozen=True)
class Sizes:
    """How big each figure's measurement is (a test passes tiny ones)."""

    race_tokens: int = 64  # the KV race's new tokens
    batch: int = 16  # the batch sweep's largest batch, against batch 1
    batch_steps: int = 8
    prefill_tokens: int = 1024  # one pass over these, against 16 fed one at a time
    quant_tokens: int = 32  # decode steps of each lane of the int4 race
    int4_mode: str = "int4-g32"


@dataclass(frozen=True)
class Figure:
    """One headline figure as a lesson would show it, and the sanity bound checked again."""

    robust: Robust | None  # the estimate and its range (None: not measured)
    withheld: str | None  # the measurement's own reason not to show it (None: shown)
    bound: str | None  # what the sanity bound says of the figure (None: possible)

    @property
    def shown(self) -> float | None:
        return self.robust.estimate if self.robust and not self.withheld else None

    def keys(self, prefix: str) -> dict:
        r = self.robust
        return {prefix: self.shown, f"{prefix}_range": r.label() if r else None,
                f"{prefix}_spread": r.spread if r else None, f"{prefix}_withheld": self.withheld}


def kv_race(lm, sizes: Sizes, shared) -> Figure:
    ids = prompt_ids(lm.tokenizer, KV_PROMPT)
    s = summarize(list(checked_race(lm, ids, sizes.race_tokens)), len(ids))
    return Figure(s.robust, s.impossible, noise.cached_step(1.0, s.speedup) if s.robust else None)


def batch_gain(lm, sizes: Sizes, shared) -> Figure:
    ids = prompt_ids(lm.tokenizer, PROMPT)
    bw = shared.get("bandwidth")
    *_, done = run_sweep(lm, ids, sizes.batch, sizes.batch_steps, bandwidth_gbs=bw)
    one, big = done.points[0], done.points[-1]
    gain = big.gain_over(one)
    return Figure(gain, big.impossible, noise.batch_gain(big.batch // one.batch, gain.estimate))


def prefill_ratio(lm, sizes: Sizes, shared) -> Figure:
    *_, done = prefill_sweep(lm, [sizes.prefill_tokens], max_sequential=0)
    p = done.points[-1]
    return Figure(p.robust, p.impossible, noise.one_pass(p.tokens, p.speedup))


def int4_speed(lm, sizes: Sizes, shared) -> Figure:
    base, mode = build_mode(lm, "fp32", shared), build_mode(lm, sizes.int4_mode, shared)
    ids = prompt_ids(lm.tokenizer, PROMPT)
    *_, race = checked_speed_race(sizes.int4_mode, base.model, mode.model, ids,
                                  sizes.quant_tokens, lm.device,
                                  (base.bytes_per_token, mode.bytes_per_token),
                                  shared.get("bandwidth"))
    bound = noise.bandwidth(race.tokens_per_s[1], race.ceilings[1])  # int4's lane
    return Figure(race.robust, race.impossible, bound)


FIGURES: dict[str, Callable] = {"kv_race": kv_race, "batch_gain": batch_gain,
                                "prefill_ratio": prefill_ratio, "int4_speed": int4_speed}


def measure_all(lm, sizes: Sizes, shared, keep_quiet: bool = False) -> dict[str, Figure]:
    """Every figure once; with `keep_quiet`, those judged quiet become this machine's reference."""
    out = {}
    for name, measure in FIGURES.items():
        watch = noise.begin(lm.device)
        figure = measure(lm, sizes, shared)
        judged, _ = noise.end(lm.device, watch)
        if keep_quiet and figure.robust is not None and figure.withheld is None:
            key = f"bench {name} {dataclasses.astuple(sizes)}"
            quiet_reference.keep_if_quiet(key, figure.robust.estimate, figure.robust.label(),
                                          judged)
        out[name] = figure
    return out


@contextlib.contextmanager
def spinner(timeout_s: float = 30.0) -> Iterator[subprocess.Popen]:
    """Another process keeping one core busy, from its first line until the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # blocks until the loop has started, or the process died
        if line.strip() != "spinning":
            raise RuntimeError(f"the spinner did not start (exit {proc.poll()})")
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=timeout_s)


@contextlib.contextmanager
def serving_chats(chats: int = 30, tokens: int = 48) -> Iterator[None]:
    """The app serving `chats` streaming chats, asked again and again, for the whole block."""
    stop = threading.Event()
    with start_app() as app, ThreadPoolExecutor(max_workers=chats) as pool:
        fn = chat_fn_index(app.url)
        for i in range(chats):
            pool.submit(chat_stream, Student(app.url, None), fn, f"{PROMPT} ({i})", tokens, stop)
        try:
            yield
        finally:
            stop.set()


def report(quiet: dict[str, Figure], loaded: dict[str, dict[str, Figure]]) -> dict:
    """Per figure the quiet and loaded figures, loaded ÷ quiet and `off` (the larger of it and
    its inverse, what the target checks); `impossible_shown` and `withheld` over every run."""
    out: dict = {}
    for name, q in quiet.items():
        fig = out[name] = q.keys("quiet")
        for load, figures in loaded.items():
            if (f := figures.get(name)) is not None:
                ratio = round(f.shown / q.shown, 3) if f.shown and q.shown else None
                fig[load] = f.keys("loaded") | {
                    "loaded_vs_quiet": ratio,
                    "off": round(max(ratio, 1 / ratio), 3) if ratio else None}
    runs = [*quiet.values(), *(f for figures in loaded.values() for f in figures.values())]
    out["impossible_shown"] = sum(f.bound is not None and f.withheld is None for f in runs)
    out["withheld"] = sum(f.withheld is not None for f in runs)
    return out


TARGETS = {  # loaded ÷ quiet within 0.75–1.33 under each load; no impossible figure shown
    **{f"robust.{name}.{load}.off": ("<=", 1.33) for name in FIGURES for load in LOADS},
    "robust.impossible_shown": ("<=", 0),
}


def measure_robust(lm, sizes: Sizes = Sizes(), loads: tuple[str, ...] = LOADS) -> dict:
    shared = SharedResults()  # every run's ceiling: the best of 3 bandwidth reads
    shared.put("bandwidth", max(measure_read_bandwidth(lm.device) for _ in range(3)))
    quiet = measure_all(lm, sizes, shared, keep_quiet=True)
    loaded = {}
    for load in loads:
        with spinner() if load == "spinner" else serving_chats():
            loaded[load] = measure_all(lm, sizes, shared)
    return report(quiet, loaded)


if __name__ == "__main__":
    print(json.dumps(measure_robust(load_model()), indent=1))
