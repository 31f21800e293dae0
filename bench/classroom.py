"""The classroom figures, measured on the running app (`start_app`) as a class reaches it.

A school is one address: the app is started behind one trusted proxy
(`LLM_LAB_TRUSTED_PROXIES=1`, as on a Space) and every student sends the same forwarded
address, loads the page first and keeps its cookie (`bench/classroom_school.py`: how the bench
plays the proxy and the browsers). The figures, under `serving.classroom`:

- `at_once`: a teacher says "everyone press Run now". A class of `students` (30), in turn over
  the four lesson measurements, press with the page's defaults within `spread_s` (3 s) while
  `chats` (3) classmates keep streaming answers. A result is the handler's final output, timed
  from the student's own press; one served by another visitor's identical run is counted
  (`shared_results`), as is the p95 gap between a chat's updates.
- `own_settings`: the same class presses again, each with settings of its own (`own_inputs`: no
  two alike, so nothing is shared): the time to a first update (a place in line, or progress),
  and whether the results came in the order the line took the presses.
- `forged`: one script (no page, no cookie) presses `presses` (100) measurements within
  `spread_s`, writing a new X-Forwarded-For first hop on every request, while a student at the
  school presses one: the most of the script's presses in the queue at once (`peak_in_line`:
  one visitor's share is 1), and whether the student's press was refused.
- `chat_flood`: one script, forging as above, floods `floods` (100) chats of `flood_tokens`
  (256); then a student at the school asks a 48-token question (`other_chat_s`: to a complete
  answer).

`chats_while_measuring` (a fresh app, no proxy: every client is one local visitor): ten chats
stream alone, then while one visitor runs the KV race and the batch sweep back to back (the
chats start once the race runs): tokens/s both ways, and the share of the chats' wall time that
a measurement was running.

`soak` (`serving.soak`, its own app behind the proxy): `duration_s` (20 min) of `chats` (3)
students chatting without pause and a student pressing a measurement every `every_s` (30 s),
then `idle_s` (5 min) of nothing: the app's RSS idle, at its peak and after, and errors.

Run: `make bench-classroom` (`--help` for the sizes) writes bench/classroom-results.json;
`make bench` runs the same into `results["serving"]`. Run it on a quiet machine.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from bench.app_server import RssWatch, start_app
from bench.classroom_school import (
    ELSEWHERE,
    LESSONS,
    Stamps,
    Student,
    chat,
    chat_stream,
    class_of,
    lesson_inputs,
    line_figures,
    peak_in_line,
    press,
    result_figures,
    update_gaps,
)
from bench.gradio_stream import chat_fn_index
from bench.serving_workloads import Workload, app_stream, class_prompt, drive
from bench.targets import finish
from inference.stats import percentile

FIGURES = ("classroom", "chats_while_measuring", "soak")  # their keys in results["serving"]
MEASURING = ("/kv_race", "/batch_sweep")  # chats_while_measuring's visitor, back to back
BEHIND_PROXY = {"LLM_LAB_TRUSTED_PROXIES": "1"}  # the app as on a Space
TARGETS = {"serving.classroom.at_once.refused": ("<=", 0),
           "serving.classroom.at_once.worst_p95_result_s": ("<=", 60),  # a class's minute
           "serving.classroom.at_once.errors": ("<=", 0),
           "serving.classroom.own_settings.refused": ("<=", 0),
           "serving.classroom.own_settings.p95_first_update_s": ("<=", 1.0),
           "serving.classroom.own_settings.in_queue_order": (">=", 1),  # True
           "serving.classroom.forged.peak_in_line": ("<=", 1),  # Settings.client_heavy_jobs
           "serving.classroom.chat_flood.other_chat_s": ("<=", 30),
           "serving.chats_while_measuring.ratio_measuring_vs_alone": (">=", 0.5),
           "serving.soak.rss_after_vs_idle": ("<=", 1.5),
           "serving.soak.errors": ("<=", 0)}


def class_presses(url: str, students: list[Student], own: bool = False,
                  chats: Sequence[Student] = (), chat_tokens: int = 48, spread_s: float = 3.0,
                  lessons: tuple[str, ...] = LESSONS) -> dict:
    """Every student presses a lesson (in turn) within `spread_s`: (a) `at_once`, with the
    page's defaults while `chats` stream (and the gaps between their updates meanwhile), or
    (b) `own_settings`, each with settings of its own (and how the line answered)."""
    pick, fn = lesson_inputs(url, lessons, own), chat_fn_index(url)
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=len(students) + len(chats)) as pool:
        streams = [pool.submit(chat_stream, s, fn, class_prompt(k), chat_tokens, stop)
                   for k, s in enumerate(chats)]
        go = time.perf_counter() + (3.0 if chats else 0.5)  # the chats are streaming by then
        step = spread_s / max(1, len(students) - 1)
        runs = [pool.submit(press, s, *pick(i), go + i * step) for i, s in enumerate(students)]
        presses = [r.result() for r in runs]
        stop.set()
        talk = [s.result() for s in streams]
    end = max(p["end"] for p in presses)
    figures = {"students": len(students), "spread_s": spread_s, **result_figures(presses),
               "wall_s": end - go}
    if own:
        return figures | line_figures(presses)
    gaps = update_gaps([a for t in talk for a in t["answers"]], go, end)
    return figures | {"chats": len(chats), "chat_p95_gap_s": percentile(gaps, 95) if gaps else None,
                      "chat_errors": sum(len(t["errors"]) for t in talk)}


def forged(url: str, presses: int = 100, spread_s: float = 5.0,
           lessons: tuple[str, ...] = LESSONS) -> dict:
    """(c) A script forging its first hop on every request presses `presses` measurements (its
    own settings each) within `spread_s`; a student at the school presses one halfway."""
    pick = lesson_inputs(url, lessons, own=True)
    script, student = Student(url, ELSEWHERE, forges=True), class_of(url, 1)[0]
    step = spread_s / max(1, presses - 1)
    with ThreadPoolExecutor(max_workers=min(presses, 32) + 1) as pool:
        go = time.perf_counter() + 0.5
        other = pool.submit(press, student, *pick(presses), go + spread_s / 2)
        runs = [pool.submit(press, script, *pick(i), go + i * step) for i in range(presses)]
        theirs = [r.result() for r in runs]
        mine = other.result()
    accepted = [p for p in theirs if not p.get("refused")]
    return {"presses": presses, "spread_s": spread_s, "accepted": len(accepted),
            "refused": presses - len(accepted), "peak_in_line": peak_in_line(accepted),
            "other_refused": bool(mine.get("refused")), "other_ok": mine["ok"],
            "other_result_s": mine.get("result_s"),
            "error_messages": sorted({p["error"] for p in theirs if "error" in p})[:3]}


def chat_flood(url: str, floods: int = 100, flood_tokens: int = 256, new_tokens: int = 48,
               spread_s: float = 1.0) -> dict:
    """(d) A script forging its first hop floods `floods` chats within `spread_s`; then a
    student at the school asks one `new_tokens` question: its time to a complete answer."""
    fn = chat_fn_index(url)
    script, student = Student(url, ELSEWHERE, forges=True), class_of(url, 1)[0]
    step = spread_s / max(1, floods - 1)
    with ThreadPoolExecutor(max_workers=floods) as pool:
        go = time.perf_counter() + 0.5
        runs = [pool.submit(chat, script, fn, class_prompt(i), flood_tokens, at=go + i * step)
                for i in range(floods)]
        time.sleep(max(0.0, go + spread_s + 0.5 - time.perf_counter()))  # the flood is in
        mine = chat(student, fn, class_prompt(floods), new_tokens)
        theirs = [r.result() for r in runs]
    return {"floods": floods, "flood_tokens": flood_tokens, "new_tokens": new_tokens,
            "flood_answered": sum(c["ok"] for c in theirs),
            "flood_refused": sum(not c["ok"] for c in theirs),
            "other_chat_s": mine["seconds"] if mine["ok"] else None, "other_ok": mine["ok"],
            "other_tokens": mine.get("tokens"), "other_error": mine.get("error"),
            "flood_errors": sorted({c["error"][:120] for c in theirs if "error" in c})[:3]}


def soak_on(url: str, pid: int, duration_s: float, idle_s: float, every_s: float = 30.0,
            chats: int = 3, chat_tokens: int = 48, lessons: tuple[str, ...] = LESSONS) -> dict:
    """The soak on a running app (`pid`: its process): mixed load for `duration_s`, then
    `idle_s` of nothing; RSS idle (before the load), at peak, and after."""
    pick, fn = lesson_inputs(url, lessons, own=True), chat_fn_index(url)
    talkers, stop = class_of(url, chats), threading.Event()
    pressing = int(duration_s // every_s) + 1  # a thread each: a press waits in line, not here
    with RssWatch(pid) as watch, ThreadPoolExecutor(max_workers=chats + pressing) as pool:
        idle_mb = watch.now_mb()
        streams = [pool.submit(chat_stream, s, fn, class_prompt(k), chat_tokens, stop)
                   for k, s in enumerate(talkers)]
        go, runs = time.perf_counter(), []
        while (at := go + len(runs) * every_s) < go + duration_s:  # a new student each time
            runs.append(pool.submit(press, class_of(url, 1)[0], *pick(len(runs)), at))
            stop.wait(max(0.0, at - time.perf_counter()))
        stop.wait(max(0.0, go + duration_s - time.perf_counter()))
        stop.set()
        presses, talk = [r.result() for r in runs], [s.result() for s in streams]
        peak_mb = watch.peak_mb()
        time.sleep(idle_s)  # nobody: what the app hands back
        after_mb = watch.now_mb()
    failed = [p for p in presses if not p["ok"]]
    return {"duration_s": duration_s, "idle_s": idle_s, "every_s": every_s, "chats": chats,
            "answers": sum(len(t["answers"]) for t in talk), "measurements": len(presses),
            "idle_rss_mb": idle_mb, "peak_rss_mb": peak_mb, "after_rss_mb": after_mb,
            "rss_after_vs_idle": after_mb / idle_mb if idle_mb else None,
            "errors": len(failed) + sum(len(t["errors"]) for t in talk),
            "error_messages": ([p["error"] for p in failed]
                               + [e for t in talk for e in t["errors"]])[:5]}


def overlap_share(span: tuple[float, float], busy: list[tuple[float, float]]) -> float:
    """The share of `span` covered by the `busy` intervals (assumed not to overlap)."""
    a, b = span
    covered = sum(max(0.0, min(b, e) - max(a, s)) for s, e in busy)
    return covered / (b - a) if b > a else 0.0


def chats_while_measuring(chats: int = 10, new_tokens: int = 48) -> dict:
    """`chats` streaming chats alone, then while one visitor runs MEASURING (fresh app)."""
    with start_app() as app:
        chat, room = app_stream(app.url), Workload("chats", chats, new_tokens)
        alone = asyncio.run(drive(room, chat))
        pick, first = lesson_inputs(app.url, MEASURING, own=False), Stamps()
        visitor = Student(app.url, address=None)  # a local visitor, as the chats are

        def in_turn() -> list[dict]:  # the first press's stamps say when it is measuring
            return [press(visitor, *pick(i), 0.0, first if i == 0 else None)
                    for i in range(len(MEASURING))]
        with ThreadPoolExecutor(max_workers=1) as pool:
            measuring = pool.submit(in_turn)
            while first.turn is None and not measuring.done():
                time.sleep(0.2)  # until the race has started measuring
            go = time.perf_counter()  # the chats are sent all at once: their span starts here
            during = asyncio.run(drive(room, chat))
            measured = measuring.result()
    busy = [(m["start"], m["end"]) for m in measured]
    ratio = (during["tokens_per_s"] / alone["tokens_per_s"]) if alone["tokens_per_s"] else None
    return {"chats": chats, "new_tokens": new_tokens, "alone_tokens_per_s": alone["tokens_per_s"],
            "measuring_tokens_per_s": during["tokens_per_s"], "ratio_measuring_vs_alone": ratio,
            "measuring_share_of_chat_wall": overlap_share((go, go + during["wall_s"]), busy),
            "measurements": [{"lesson": m["lesson"], "seconds": m["end"] - m["start"],
                              "error": m.get("error")} for m in measured],
            "alone": alone, "measuring": during}


def measure_classroom(students: int = 30, chats: int = 3, measuring_chats: int = 10,
                      new_tokens: int = 48, soak_s: float = 1_200.0,
                      idle_s: float = 300.0) -> dict:
    """Every figure, each group on its own fresh app (behind the proxy but the chats while
    measuring, stopped at the end): the keys `make bench` puts in `serving`."""
    def say(what: str) -> None:
        print(f"== {what} ({time.strftime('%H:%M:%S')})", flush=True)
    say(f"one school address: {students} students press the four lessons' Run with defaults "
        f"while {chats} chat, then each with their own settings")
    with start_app(BEHIND_PROXY) as app:
        room = class_of(app.url, students + chats)
        figures = {"cookies": sum(bool(s.cookies) for s in room),
                   "at_once": class_presses(app.url, room[:students], chats=room[students:],
                                            chat_tokens=new_tokens),
                   "own_settings": class_presses(app.url, room[:students], own=True)}
    say("a script forging X-Forwarded-For: 100 measurements, then 100 chats")
    with start_app(BEHIND_PROXY) as app:
        figures |= {"forged": forged(app.url),
                    "chat_flood": chat_flood(app.url, new_tokens=new_tokens)}
    say(f"chats while measuring: {measuring_chats} chats alone, then beside the KV race and "
        "the batch sweep")
    measuring = chats_while_measuring(measuring_chats, new_tokens)
    say(f"soak: {soak_s:.0f} s of chats and a measurement every 30 s, then {idle_s:.0f} s idle")
    with start_app(BEHIND_PROXY) as app:
        soaked = soak_on(app.url, app.pid, soak_s, idle_s)
    return {"classroom": figures, "chats_while_measuring": measuring, "soak": soaked}


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=30, help="a class behind one address")
    parser.add_argument("--chats", type=int, default=3, help="chats streaming meanwhile")
    parser.add_argument("--measuring-chats", type=int, default=10,
                        help="chats streaming alone, then beside a measuring visitor")
    parser.add_argument("--new-tokens", type=int, default=48, help="tokens per chat answer")
    parser.add_argument("--soak-s", type=float, default=1_200.0, help="the soak's mixed load")
    parser.add_argument("--idle-s", type=float, default=300.0, help="the soak's idle after")
    args = parser.parse_args()
    t0 = time.perf_counter()
    results: dict = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "serving": measure_classroom(
        args.students, args.chats, args.measuring_chats, args.new_tokens, args.soak_s,
        args.idle_s)}
    print(json.dumps(results["serving"], indent=1))
    return finish(results, TARGETS, t0, "classroom-results.json")


if __name__ == "__main__":
    main()
