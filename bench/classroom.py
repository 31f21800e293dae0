"""The classroom figures, measured on the running app (`start_app`) as visitors reach it.

`lessons_at_once`: a teacher says "everyone press Run now". `clients` visitors (30), spread in
turn over the four lesson measurements (the prefill sweep, the KV race, the batch sweep, the
quantization comparison), each press the button with its default settings, one after another
within `spread_s` (3 s), while `chats` chat clients (3) keep streaming answers. A visitor's
*result* is the handler's final output (the generator's last update; `Job.result()`), timed
from their own press. Reported: each lesson's p95 time to a result, the worst of the four,
the presses that got no result (refused, an error, stopped at a time limit), and the p95 gap
between consecutive updates a chat client saw during it (from its submit to its first update,
then update to update, stamped as each message arrives).

`chats_while_measuring`: ten chat clients (`class_load`, `app_chat`: the same clients as the
serving figures) stream alone, then again while one other visitor runs the KV race and the
batch sweep back to back (default settings; the chats start once the race is running). Tokens/s
over the chats' wall time both ways, their ratio, and the share of the chats' wall time that a
measurement was running (a ratio measured after the measurements ended would flatter the app).

How the bench stands for different students. The app counts fairness by client address
(`classroom/client_address.py`): X-Forwarded-For's first hop when the header is there
(it trusts the header, as a Space's proxy sets it), else the TCP peer, and a loopback peer with
no header is "local": one person at this machine, left uncapped. Every bench client comes from
127.0.0.1, so without the header 30 visitors would be one uncapped visitor and the per-address
caps (`client_events`, `client_heavy_jobs`) would never be exercised. So each visitor here has
its own session and sends its own `X-Forwarded-For` address from 198.18.0.0/15 (the range set
aside for benchmarks, RFC 2544), as students behind a Space's proxy arrive. In
`lessons_at_once` the 33 visitors speak Gradio's queue protocol with the standard library
(`bench.gradio_stream.call`), as the serving figures' clients do: 33 `gradio_client` clients
(their threads, polling and diffs) spent the same 2 cores the app measured on, which 30
students' own laptops never take from it (the worst lesson's p95 was a fifth longer with
them). Checked on the running app: a
second measurement from one forwarded address is refused ("Queue is full") while another
address's is served. The chats of
`chats_while_measuring` are the serving figures' own clients, sent without the header (local,
uncapped: ten chats are far below every cap either way).

Requests are identical per lesson (default settings), so the app's shared runs
(`classroom/shared_runs.py`) may serve many visitors from one run: that is what a class
pressing the same button gets, and `shared_results` counts the results that said so. Each
figure starts a fresh app, so neither reuses a result of the other's runs.

Run: `make bench-classroom` (`.venv/bin/python -m bench.classroom`, `--help` for the sizes):
writes bench/classroom-results.json; `make bench` runs the same into `results["serving"]`.
Run it on a quiet machine: the app and its 40 clients share the cores.
"""
from __future__ import annotations

import argparse
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from bench.app_server import ROOT, start_app
from bench.gradio_stream import app_config, call, chat_fn_index, endpoint_data
from bench.serving import app_chat, class_load, class_prompt
from bench.targets import check
from inference.stats import percentile

LESSONS = ("/prefill_sweep", "/kv_race", "/batch_sweep", "/quant_compare")
FIGURES = ("lessons_at_once", "chats_while_measuring")  # their keys in results["serving"]
MEASURING = ("/kv_race", "/batch_sweep")  # chats_while_measuring's visitor, back to back
TARGETS = {"serving.lessons_at_once.worst_p95_result_s": ("<=", 60),  # a class's minute
           "serving.lessons_at_once.errors": ("<=", 0),
           "serving.chats_while_measuring.ratio_measuring_vs_alone": (">=", 0.5)}
RESULT_WAIT_S = 1_000.0  # longer than the app's own longest time limit (900 s)
TIME_UP_MARK = "⏱"  # a run stopped at its time limit (lessons/common/measurement.TIME_UP)
LEFT_MARK = "The run you were following ended"  # its leader stopped (shared_runs.LEFT)
SHARED_MARK = "for another visitor"  # a result from another visitor's run (shared_runs)


def visitor_address(i: int) -> str:
    """Student i's forwarded address, in the benchmarking range: 0 -> '198.18.0.1'."""
    return f"198.18.{i // 250}.{i % 250 + 1}"


def forwarded(i: int) -> dict:
    """Student i's header, as a Space's proxy sends it."""
    return {"X-Forwarded-For": visitor_address(i)}


def student(url: str, i: int):
    """A gradio_client Client for student i: its own session, its own forwarded address."""
    from gradio_client import Client

    return Client(url, verbose=False, headers=forwarded(i), httpx_kwargs={"timeout": 300})


def default_inputs(client, api_name: str) -> list:
    """The endpoint's inputs as the page first shows them (its components' values)."""
    api = client.view_api(return_format="dict", print_info=False)["named_endpoints"][api_name]
    missing = [p["label"] for p in api["parameters"] if not p.get("parameter_has_default")]
    if missing:
        raise RuntimeError(f"{api_name} has inputs without a default: {missing}")
    return [p["parameter_default"] for p in api["parameters"]]


def _texts(outputs) -> list[str]:
    values = outputs if isinstance(outputs, (tuple, list)) else [outputs]
    return [v for v in values if isinstance(v, str)]


def no_result(outputs) -> str | None:
    """Why a final output is not a measurement's result (stopped, its run left), else None."""
    for text in _texts(outputs):
        if text.lstrip().startswith(TIME_UP_MARK):
            return "stopped at its time limit"
        if LEFT_MARK in text:
            return "the run it followed was stopped"
    return None


def shared(outputs) -> bool:
    """True when the result says it came from another visitor's run (followed or reused)."""
    return any(SHARED_MARK in text for text in _texts(outputs))


def press(url: str, i: int, api_name: str, endpoint: tuple[int, list], at: float) -> dict:
    """At perf_counter `at`, student i presses the button (the light client, with the
    student's forwarded address); wait for the final output; time it."""
    time.sleep(max(0.0, at - time.perf_counter()))
    t0 = time.perf_counter()
    try:
        outputs = call(url, *endpoint, timeout_s=RESULT_WAIT_S, headers=forwarded(i))
        end = time.perf_counter()
        why = no_result(outputs)
        return {"lesson": api_name.strip("/"), "ok": why is None, "start": t0, "end": end,
                "result_s": end - t0, "shared": shared(outputs)} | ({"error": why} if why else {})
    except Exception as exc:  # refused, an error reply, no answer in time: counted
        return {"lesson": api_name.strip("/"), "ok": False, "start": t0,
                "end": time.perf_counter(), "error": f"{type(exc).__name__}: {exc}"[:300]}


def result_figures(presses: list[dict]) -> dict:
    """Per lesson: p95 seconds to a result (None where none came), how many were shared;
    the worst p95 of the lessons; presses without a result and the first few reasons."""
    lessons = sorted({p["lesson"] for p in presses})
    p95, n_shared = {}, {}
    for lesson in lessons:
        ok = [p for p in presses if p["lesson"] == lesson and p["ok"]]
        p95[lesson] = percentile([p["result_s"] for p in ok], 95) if ok else None
        n_shared[lesson] = sum(p["shared"] for p in ok)
    got = [v for v in p95.values() if v is not None]
    return {"p95_result_s": p95, "worst_p95_result_s": max(got) if got else None,
            "errors": sum(not p["ok"] for p in presses), "shared_results": n_shared,
            "error_messages": [p["error"] for p in presses if "error" in p][:5]}


def update_gaps(answers: list[list[float]], start: float, end: float) -> list[float]:
    """Gaps between consecutive stamps of each answer ([submit, update, update, ...]) that
    overlap the window [start, end]: what a chatting student waited for the next update."""
    return [b - a for stamps in answers for a, b in zip(stamps, stamps[1:])
            if b >= start and a <= end]


def chat_stream(url: str, fn_index: int, i: int, new_tokens: int,
                stop: threading.Event) -> dict:
    """Ask student i's question again and again until `stop`; stamp every streamed update."""
    answers, errors = [], []
    while not stop.is_set():
        stamps = [time.perf_counter()]
        try:
            call(url, fn_index, [class_prompt(i), new_tokens], timeout_s=RESULT_WAIT_S,
                 headers=forwarded(i), stamps=stamps)
        except Exception as exc:  # counted; the student asks again, a moment later
            errors.append(f"{type(exc).__name__}: {exc}"[:300])
            stop.wait(1.0)
        answers.append(stamps)
    return {"answers": answers, "errors": errors}


def lessons_at_once(clients: int = 30, chats: int = 3, chat_tokens: int = 48,
                    spread_s: float = 3.0) -> dict:
    """`clients` students press the four lessons' buttons within `spread_s` while `chats`
    others stream; see the module docstring. A fresh app, stopped at the end."""
    app = start_app()
    try:
        config = app_config(app.url)  # as every student's page reads it first
        endpoints = {api: endpoint_data(config, api.strip("/"), {}) for api in LESSONS}
        chat_fn = chat_fn_index(app.url)
        stop = threading.Event()
        with ThreadPoolExecutor(max_workers=clients + chats) as pool:
            streams = [pool.submit(chat_stream, app.url, chat_fn, clients + k, chat_tokens, stop)
                       for k in range(chats)]
            go = time.perf_counter() + 3.0  # the chats are streaming by then
            step = spread_s / max(1, clients - 1)
            runs = [pool.submit(press, app.url, i, LESSONS[i % 4], endpoints[LESSONS[i % 4]],
                                go + i * step) for i in range(clients)]
            presses = [r.result() for r in runs]
            stop.set()
            talk = [s.result() for s in streams]
        end = max(p["end"] for p in presses)
        gaps = update_gaps([a for t in talk for a in t["answers"]], go, end)
    finally:
        app.stop()
    return {"clients": clients, "chats": chats, "chat_tokens": chat_tokens, "spread_s": spread_s,
            **result_figures(presses), "wall_s": end - go,
            "chat_p95_gap_s": percentile(gaps, 95) if gaps else None,
            "chat_max_gap_s": max(gaps) if gaps else None,
            "chat_errors": sum(len(t["errors"]) for t in talk)}


def overlap_share(span: tuple[float, float], busy: list[tuple[float, float]]) -> float:
    """The share of `span` covered by the `busy` intervals (assumed not to overlap)."""
    a, b = span
    covered = sum(max(0.0, min(b, e) - max(a, s)) for s, e in busy)
    return covered / (b - a) if b > a else 0.0


def _measure_in_turn(client, inputs: dict, first, out: list) -> None:
    """The measuring visitor: the already-submitted `first` job, then the rest, in turn."""
    for api in MEASURING:
        job = first if api == MEASURING[0] else client.submit(*inputs[api], api_name=api)
        t0 = time.perf_counter()
        try:
            why = no_result(job.result(timeout=RESULT_WAIT_S))
        except Exception as exc:  # reported beside the figure
            why = f"{type(exc).__name__}: {exc}"[:300]
        out.append({"lesson": api.strip("/"), "start": t0, "end": time.perf_counter(),
                    "error": why})


def chats_while_measuring(chats: int = 10, new_tokens: int = 48) -> dict:
    """`chats` streaming chats alone, then while one visitor runs MEASURING (fresh app)."""
    from gradio_client.utils import Status

    app = start_app()
    try:
        timed: list[dict] = []
        chat = app_chat(app.url, chat_fn_index(app.url), new_tokens)

        def one(i: int, barrier: threading.Barrier) -> dict:
            run = chat(i, barrier)
            timed.append(run)
            return run

        alone = class_load(one, chats)
        visitor = student(app.url, 0)
        inputs = {api: default_inputs(visitor, api) for api in MEASURING}
        first = visitor.submit(*inputs[MEASURING[0]], api_name=MEASURING[0])
        while not first.done() and first.status().code != Status.PROCESSING:
            time.sleep(0.2)  # until the race has started measuring
        measured: list[dict] = []
        measurer = threading.Thread(target=_measure_in_turn,
                                    args=(visitor, inputs, first, measured))
        measurer.start()
        timed.clear()
        during = class_load(one, chats)
        span = (min(r["start"] for r in timed if "start" in r),
                max(r["end"] for r in timed if "end" in r)) if timed else (0.0, 0.0)
        measurer.join()
        visitor.close()
    finally:
        app.stop()
    busy = [(m["start"], m["end"]) for m in measured]
    ratio = (during["tokens_per_s"] / alone["tokens_per_s"]) if alone["tokens_per_s"] else None
    return {"chats": chats, "new_tokens": new_tokens,
            "alone_tokens_per_s": alone["tokens_per_s"],
            "measuring_tokens_per_s": during["tokens_per_s"],
            "ratio_measuring_vs_alone": ratio,
            "measuring_share_of_chat_wall": overlap_share(span, busy),
            "measurements": [{"lesson": m["lesson"], "seconds": m["end"] - m["start"],
                              "error": m["error"]} for m in measured],
            "alone": alone, "measuring": during}


def measure_classroom(clients: int = 30, chats: int = 3, measuring_chats: int = 10,
                      new_tokens: int = 48) -> dict:
    """Both figures, each on its own fresh app: the keys `make bench` puts in `serving`."""
    print(f"== lessons at once: {clients} visitors press the four lessons' Run, {chats} chats "
          f"stream ({time.strftime('%H:%M:%S')})", flush=True)
    at_once = lessons_at_once(clients, chats, new_tokens)
    print(f"== chats while measuring: {measuring_chats} chats alone, then beside the KV race "
          f"and the batch sweep ({time.strftime('%H:%M:%S')})", flush=True)
    return {"lessons_at_once": at_once,
            "chats_while_measuring": chats_while_measuring(measuring_chats, new_tokens)}


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=30, help="visitors pressing at once")
    parser.add_argument("--chats", type=int, default=3, help="chats streaming meanwhile")
    parser.add_argument("--measuring-chats", type=int, default=10,
                        help="chats streaming alone, then beside a measuring visitor")
    parser.add_argument("--new-tokens", type=int, default=48, help="tokens per chat answer")
    args = parser.parse_args()
    t0 = time.perf_counter()
    results: dict = {"when": time.strftime("%Y-%m-%d %H:%M:%S"),
                     "serving": measure_classroom(args.clients, args.chats,
                                                  args.measuring_chats, args.new_tokens)}
    results["targets"] = check(results, TARGETS)
    results["bench_seconds"] = time.perf_counter() - t0
    return results


if __name__ == "__main__":
    res = main()
    (ROOT / "bench" / "classroom-results.json").write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=1))
    print("wrote bench/classroom-results.json")
