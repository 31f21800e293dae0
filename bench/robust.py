"""`make bench` section `robust`: do the four headline figures survive a busy machine?

The lessons measure their headline figures so that noise does not reach them
(`inference/experiments/robust.py`) and check them against physics before drawing (`sanity.py`).
This section measures each with the lessons' own functions: `kv_race` (the KV race's speed-up
at 64 new tokens), `batch_gain` (batch 16's throughput ÷ batch 1's), `prefill_ratio` (one pass
over 1,024 tokens against feeding them one at a time, per token) and `int4_speed` (int4's
decode speed ÷ float32's, raced step by step), first on a quiet machine, then under each load:
`spinner`, one other process keeping one core busy, and `chats`, the app serving 30 streaming
chats the whole time. Reported per figure: `robust.<figure>.quiet`, `.<load>.loaded`,
`.<load>.loaded_vs_quiet` (the target band: 0.75–1.33, checked as `.<load>.off` ≤ 1.33) and
the spreads; and `robust.impossible_shown`: figures a sanity bound, checked again here, would
have withheld but the measurement showed (must be 0). Each quiet run is this machine's quiet
reference too (`quiet_reference.keep_if_quiet`), as the lessons keep theirs.
Run alone: `.venv/bin/python -m bench.robust`.
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

from bench.workloads import KV_PROMPT, PROMPT
from inference.experiments import noise, quiet_reference, sanity
from inference.experiments.batch_sweep import run_sweep
from inference.experiments.kv_race import checked_race, summarize
from inference.experiments.prefill_sweep import prefill_sweep
from inference.experiments.quant_race import SpeedRace, checked_speed_race
from inference.experiments.robust import Robust
from inference.experiments.roofline import measure_read_bandwidth
from inference.experiments.shared_results import SharedResults
from inference.quant_modes import build_mode
from inference.tokens import prompt_ids

CHATS = 30  # streaming chats the app serves during the `chats` load
CHAT_TOKENS = 48
LOADS = ("spinner", "chats")
SPIN = "import sys\nprint('spinning', flush=True)\nwhile True: pass\n"  # one core, busy


@dataclass(frozen=True)
class Sizes:
    """How big each figure's measurement is (the bench's; a test passes tiny ones)."""

    race_tokens: int = 64  # the KV race's new tokens
    batch: int = 16  # the batch sweep's largest batch, against batch 1
    batch_steps: int = 8
    prefill_tokens: int = 1024  # one pass over these, against 16 fed one at a time
    quant_tokens: int = 32  # decode steps of each lane of the int4 race
    int4_mode: str = "int4-g32"


@dataclass(frozen=True)
class Figure:
    """One headline figure as a lesson would show it, and the bound checked again here."""

    robust: Robust | None  # the estimate and its range (None: not measured)
    withheld: str | None  # the measurement's own reason not to show it (None: shown)
    bound: str | None  # what the sanity bound says of the figure (None: possible)

    @property
    def impossible_shown(self) -> bool:
        return self.bound is not None and self.withheld is None


def kv_race(lm, sizes: Sizes, shared) -> Figure:
    ids = prompt_ids(lm.tokenizer, KV_PROMPT)
    s = summarize(list(checked_race(lm, ids, sizes.race_tokens)), len(ids))
    return Figure(s.robust, s.impossible, sanity.cached_step(1.0, s.speedup) if s.robust else None)


def batch_gain(lm, sizes: Sizes, shared) -> Figure:
    ids = prompt_ids(lm.tokenizer, PROMPT)
    bw = shared.get("bandwidth")
    *_, done = run_sweep(lm, ids, sizes.batch, sizes.batch_steps, bandwidth_gbs=bw)
    one, big = done.points[0], done.points[-1]
    gain = big.gain_over(one)
    return Figure(gain, big.impossible, sanity.batch_gain(big.batch // one.batch, gain.estimate))


def prefill_ratio(lm, sizes: Sizes, shared) -> Figure:
    *_, done = prefill_sweep(lm, [sizes.prefill_tokens], max_sequential=0)
    p = done.points[-1]
    return Figure(p.robust, p.impossible, sanity.one_pass(p.tokens, p.speedup))


def int4_speed(lm, sizes: Sizes, shared) -> Figure:
    base, mode = build_mode(lm, "fp32", shared), build_mode(lm, sizes.int4_mode, shared)
    ids = prompt_ids(lm.tokenizer, PROMPT)
    *_, race = checked_speed_race(sizes.int4_mode, base.model, mode.model, ids,
                                  sizes.quant_tokens, lm.device,
                                  (base.bytes_per_token, mode.bytes_per_token),
                                  shared.get("bandwidth"))
    assert isinstance(race, SpeedRace)
    bound = sanity.bandwidth(race.tokens_per_s[1], race.ceilings[1])  # int4's lane
    return Figure(race.robust, race.impossible, bound)


FIGURES: dict[str, Callable] = {"kv_race": kv_race, "batch_gain": batch_gain,
                                "prefill_ratio": prefill_ratio, "int4_speed": int4_speed}


def measure_all(lm, sizes: Sizes, shared, keep_quiet: bool = False) -> dict[str, Figure]:
    """Every figure once; with `keep_quiet`, each shown figure the noise rule judged quiet
    becomes this machine's reference (the first one only: `keep_if_quiet`)."""
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
    """Another process keeping one core busy, from the moment it says it runs (polled: its
    first line) until the block ends."""
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
def serving_chats(chats: int = CHATS, tokens: int = CHAT_TOKENS) -> Iterator[None]:
    """The app serving `chats` streaming chats for the whole block, each client (a local
    visitor, as the app's own page) asking again as its answer ends (`chat_stream`)."""
    from bench.app_server import start_app
    from bench.classroom_school import Student, chat_stream
    from bench.gradio_stream import chat_fn_index

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
    """The section's figures, nested as `results["robust"]` (the dotted keys `robust.<figure>.
    quiet`, `robust.<figure>.<load>.loaded_vs_quiet`, ...): per figure its quiet estimate and
    range, per load its loaded estimate, range, loaded ÷ quiet and how far that is off 1
    (`off`: the larger of it and its inverse, the target's one number); and `impossible_shown`
    and `withheld` counted over every run.

    >>> quiet, busy = Robust(2.8, 2.6, 3.0, 5), Robust(2.1, 2.0, 2.2, 5)
    >>> f = report({"kv_race": Figure(quiet, None, None)},
    ...            {"spinner": {"kv_race": Figure(busy, None, None)}})
    >>> f["kv_race"]["spinner"]["loaded_vs_quiet"], f["kv_race"]["spinner"]["off"]
    (0.75, 1.333)
    >>> f["impossible_shown"], f["kv_race"]["quiet_range"]
    (0, '2.8×, range 2.6–3.0 over 5 rounds')
    """
    out: dict = {}
    for name, q in quiet.items():
        base = q.robust.estimate if q.robust and not q.withheld else None
        fig = out[name] = {"quiet": base, "quiet_range": q.robust.label() if q.robust else None,
                           "quiet_spread": q.robust.spread if q.robust else None,
                           "quiet_withheld": q.withheld}
        for load, figures in loaded.items():
            f = figures.get(name)
            if f is None:
                continue
            est = f.robust.estimate if f.robust and not f.withheld else None
            ratio = round(est / base, 3) if est and base else None
            fig[load] = {"loaded": est, "loaded_range": f.robust.label() if f.robust else None,
                         "loaded_spread": f.robust.spread if f.robust else None,
                         "loaded_withheld": f.withheld, "loaded_vs_quiet": ratio,
                         "off": round(max(ratio, 1 / ratio), 3) if ratio else None}
    runs = [*quiet.values(), *(f for figures in loaded.values() for f in figures.values())]
    out["impossible_shown"] = sum(f.impossible_shown for f in runs)
    out["withheld"] = sum(f.withheld is not None for f in runs)
    return out


TARGETS = {  # loaded ÷ quiet within 0.75–1.33 under each load; no impossible figure shown
    **{f"robust.{name}.{load}.off": ("<=", 1.33) for name in FIGURES for load in LOADS},
    "robust.impossible_shown": ("<=", 0),
}


def measure_robust(lm, sizes: Sizes = Sizes(), loads: tuple[str, ...] = LOADS) -> dict:
    """The section: quiet, then under each of `loads`."""
    shared = SharedResults()
    # the ceiling for every run: the best of 3 (another program only ever lowers it)
    shared.put("bandwidth", max(measure_read_bandwidth(lm.device) for _ in range(3)))
    quiet = measure_all(lm, sizes, shared, keep_quiet=True)
    loaded = {}
    for load in loads:
        with spinner() if load == "spinner" else serving_chats():
            loaded[load] = measure_all(lm, sizes, shared)
    return report(quiet, loaded)


if __name__ == "__main__":
    from inference.loading import load_model

    print(json.dumps(measure_robust(load_model()), indent=1))
