"""The classroom figures, measured on the running app as a class reaches it: behind one school
address (the bench plays a Space's proxy, appending it to `X-Forwarded-For`), each `Student` a
browser keeping the app's visitor cookie, a forger writing a new made-up first hop on every
request (`measure_classroom` lists the scenes). Run alone: `make bench-classroom` (`--help`).
"""
from __future__ import annotations

import argparse
import asyncio
import ipaddress
import itertools
import json
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from bench import clients
from bench.app_server import RssWatch, start_app
from bench.serving_workloads import Workload, app_stream, class_prompt, drive
from bench.targets import announce, run_alone
from inference.stats import percentile

LESSONS = ("/prefill_sweep", "/kv_race", "/batch_sweep", "/quant_compare")
MEASURING = ("/kv_race", "/batch_sweep")  # chats_while_measuring's visitor, back to back
BEHIND_PROXY = {"LLM_LAB_TRUSTED_PROXIES": "1"}  # the app as on a Space
SCHOOL = "198.18.0.1"  # the class's one address, as the Space's proxy appends it
ELSEWHERE = "198.18.1.1"  # a client at home: the forger's and the flooder's real address
FORGED_FROM = ipaddress.ip_address("100.64.0.1")  # a forger's made-up hops count up from here
COOKIE = "llm_lab_visitor"  # the app's visitor token (classroom.visitor_token.COOKIE)
RESULT_WAIT_S = 1_000.0  # longer than the app's own longest time limit (900 s)
TIME_UP_MARK = "⏱"  # a run stopped at its time limit (lessons/common/measurement.TIME_UP)
LEFT_MARK = "The run you were following ended"  # its leader stopped (shared_runs.LEFT)
SHARED_MARK = "for another visitor"  # a result from another visitor's run (shared_runs)
IN_LINE_MARK = "Your measurement is"  # its place in line (measurement_wiring.IN_LINE)
TURN_MARK = "Your turn"  # its run starts after waiting (measurement_wiring.YOUR_TURN)
FULL_MARKS = ("HTTP 503", "measurement line is full")  # refused: at the queue, by the line
JITTER_S = 0.1  # stamps on separate connections: an accept this close to another's end follows it
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


def p95(values: list[float]) -> float | None:
    return percentile(values, 95) if values else None


@dataclass
class Student:
    """One browser behind the school's proxy (or a forging script: `forges`)."""

    url: str
    address: str | None = SCHOOL  # the hop the proxy appends (None: no proxy, a local client)
    forges: bool = False  # writes a new first hop of its own on every request
    cookies: dict[str, str] = field(default_factory=dict)  # this browser's own jar
    _hops: itertools.count = field(default_factory=itertools.count)

    def headers(self) -> dict:
        cookie = clients.cookie_header(self.cookies)
        if self.address is None:
            return cookie
        forged = f"{FORGED_FROM + next(self._hops)}, " if self.forges else ""
        return {"X-Forwarded-For": forged + self.address, **cookie}


def class_of(url: str, n: int) -> list[Student]:
    """`n` students at the school, each having loaded the page."""
    students = [Student(url) for _ in range(n)]
    for s in students:
        s.cookies.update(clients.page_cookies(url, s.headers))
    return students


def own_inputs(config: dict, api_name: str, rank: int) -> tuple[int, list]:
    """The endpoint's inputs with student `rank`'s own settings: its first slider `rank` steps
    below the page's value (wrapping within its range, so the work stays within the default's)
    and its last number box (the lessons' guess) `rank + 1`: no two ranks press the same."""
    index, data = clients.endpoint_data(config, api_name.strip("/"), {})
    kinds = {c["id"]: (c["type"], c.get("props", {})) for c in config["components"]}
    inputs = next(d for d in config["dependencies"] if d["id"] == index)["inputs"]
    sliders = [k for k, i in enumerate(inputs) if kinds[i][0] == "slider"]
    numbers = [k for k, i in enumerate(inputs) if kinds[i][0] == "number"]
    if sliders:
        k = sliders[0]
        props = kinds[inputs[k]][1]
        step = props.get("step") or 1
        below = int((data[k] - props.get("minimum", data[k])) // step) + 1
        data[k] = data[k] - (rank % below) * step
    if numbers:
        data[numbers[-1]] = rank + 1
    return index, data


def lesson_inputs(url: str, lessons: tuple[str, ...], own: bool):
    """student i -> (api name, endpoint): lesson i % n, defaults or (`own`) settings of its own."""
    config = clients.app_config(url)  # as every student's page reads it first
    defaults = {api: clients.endpoint_data(config, api.strip("/"), {}) for api in lessons}

    def pick(i: int) -> tuple[str, tuple[int, list]]:
        api = lessons[i % len(lessons)]
        return api, own_inputs(config, api, i // len(lessons)) if own else defaults[api]
    return pick


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
    """True when the result came from another visitor's run (followed or reused)."""
    return any(SHARED_MARK in text for text in _texts(outputs))


class Stamps:
    """A press's stamps: first message, first update, turn (first update without a place)."""

    def __init__(self) -> None:
        self.began = self.first = self.turn = None
        self.waited = False

    def __call__(self, msg: dict) -> None:
        now = time.perf_counter()
        self.began = self.began or now
        if msg.get("msg") != "process_generating" or self.turn is not None:
            return
        self.first = self.first or now
        text = json.dumps((msg.get("output") or {}).get("data"), default=str)
        if IN_LINE_MARK in text:
            self.waited = True
        elif TURN_MARK in text or not self.waited:
            self.turn = now


def press(student: Student, api_name: str, endpoint: tuple[int, list], at: float,
          seen: Stamps | None = None) -> dict:
    """At perf_counter `at`, `student` presses and waits for the final output (or `refused`)."""
    time.sleep(max(0.0, at - time.perf_counter()))
    seen, t0 = seen or Stamps(), time.perf_counter()
    lesson = api_name.strip("/")
    try:
        outputs = clients.call(student.url, *endpoint, timeout_s=RESULT_WAIT_S,
                               headers=student.headers, on_message=seen)
        end = time.perf_counter()
        why = no_result(outputs)
        out = {"lesson": lesson, "ok": why is None, "start": t0, "end": end,
               "result_s": end - t0, "shared": shared(outputs)} | ({"error": why} if why else {})
    except Exception as exc:  # refused, an error reply, no answer in time: counted
        error = f"{type(exc).__name__}: {exc}"[:300]
        out = {"lesson": lesson, "ok": False, "start": t0, "end": time.perf_counter(),
               "error": error, "refused": any(m in error for m in FULL_MARKS)}
    return out | {"began": seen.began, "first": seen.first, "turn": seen.turn,
                  "waited": seen.waited}


def chat(student: Student, fn_index: int, prompt: str, new_tokens: int,
         stamps: list[float] | None = None, at: float = 0.0) -> dict:
    """One chat sent at perf_counter `at`: ok (the app counted its tokens), seconds, tokens."""
    time.sleep(max(0.0, at - time.perf_counter()))
    t0 = time.perf_counter()
    try:
        outputs = clients.call(student.url, fn_index, [prompt, new_tokens],
                               timeout_s=RESULT_WAIT_S, headers=student.headers, stamps=stamps)
        m = clients.CHAT_TOKENS.search(str(outputs[1:2]))
        return {"ok": m is not None, "seconds": time.perf_counter() - t0,
                "tokens": int(m.group(1)) if m else 0} | (
            {} if m else {"error": str(outputs)[-200:]})
    except Exception as exc:  # refused or failed: counted
        return {"ok": False, "seconds": time.perf_counter() - t0,
                "error": f"{type(exc).__name__}: {exc}"[:300]}


def chat_stream(student: Student, fn_index: int, prompt: str, new_tokens: int,
                stop: threading.Event) -> dict:
    """Ask again and again until `stop`; stamp every streamed update of every answer."""
    answers, errors = [], []
    while not stop.is_set():
        stamps = [time.perf_counter()]
        got = chat(student, fn_index, prompt, new_tokens, stamps)
        if not got["ok"]:  # counted; the student asks again, a moment later
            errors.append(got["error"])
            stop.wait(1.0)
        answers.append(stamps)
    return {"answers": answers, "errors": errors}


def result_figures(presses: list[dict]) -> dict:
    """p95 seconds to a result per lesson, worst and overall; results shared; refused; errors."""
    lessons = sorted({p["lesson"] for p in presses})
    by_lesson = {lesson: [p for p in presses if p["lesson"] == lesson and p["ok"]]
                 for lesson in lessons}
    p95s = {lesson: p95([p["result_s"] for p in ok]) for lesson, ok in by_lesson.items()}
    got = [v for v in p95s.values() if v is not None]
    refused = sum(bool(p.get("refused")) for p in presses)
    return {"p95_result_s": p95s, "worst_p95_result_s": max(got) if got else None,
            "all_p95_result_s": p95([p["result_s"] for p in presses if p["ok"]]),
            "refused": refused, "errors": sum(not p["ok"] for p in presses) - refused,
            "shared_results": {k: sum(p["shared"] for p in ok) for k, ok in by_lesson.items()},
            "error_messages": [p["error"] for p in presses if "error" in p][:5]}


def line_figures(presses: list[dict], jitter_s: float = JITTER_S) -> dict:
    """p95 seconds to a first update, presses told a place, and results out of order (answered
    `jitter_s` before one pressed `jitter_s` ahead; closer, the network decides)."""
    firsts = [p["first"] - p["start"] for p in presses if p.get("first") is not None]
    ok = [p for p in presses if p["ok"]]
    t0 = min((p["start"] for p in ok), default=0.0)
    late = [(b, a) for b in ok for a in ok
            if a["start"] < b["start"] - jitter_s and b["end"] < a["end"] - jitter_s]
    late = list({id(b): (b, a) for b, a in late}.values())  # one pair per late press
    return {"p95_first_update_s": p95(firsts), "no_first_update": len(presses) - len(firsts),
            "told_place": sum(bool(p.get("waited")) for p in presses),
            "in_queue_order": bool(ok) and not late, "out_of_order": len(late),
            "out_of_order_examples": [  # seconds from the first press
                f"{b['lesson']} pressed at {b['start'] - t0:.2f} s, answered at "
                f"{b['end'] - t0:.2f} s, before {a['lesson']} pressed at {a['start'] - t0:.2f} s "
                f"(answered at {a['end'] - t0:.2f} s)" for b, a in late[:3]]}


def peak_in_line(presses: list[dict], jitter_s: float = JITTER_S) -> int:
    """The most presses in the queue at once (one starting within `jitter_s` of an end follows)."""
    begun = [p for p in presses if p.get("began") is not None]
    # at equal times an end (-1) sorts before a start (1)
    edges = sorted([(p["began"], 1) for p in begun] + [(p["end"] - jitter_s, -1) for p in begun])
    return max(itertools.accumulate((step for _, step in edges), initial=0))


def update_gaps(answers: list[list[float]], start: float, end: float) -> list[float]:
    """Gaps between each answer's consecutive stamps that overlap [start, end]."""
    return [b - a for stamps in answers for a, b in zip(stamps, stamps[1:])
            if b >= start and a <= end]


def overlap_share(span: tuple[float, float], busy: list[tuple[float, float]]) -> float:
    """The share of `span` covered by the `busy` intervals (assumed not to overlap)."""
    a, b = span
    covered = sum(max(0.0, min(b, e) - max(a, s)) for s, e in busy)
    return covered / (b - a) if b > a else 0.0


def class_presses(url: str, students: list[Student], own: bool = False,
                  chats: Sequence[Student] = (), chat_tokens: int = 48, spread_s: float = 3.0,
                  lessons: tuple[str, ...] = LESSONS) -> dict:
    """Every student presses a lesson within `spread_s`: defaults while `chats` stream, or own."""
    pick, fn = lesson_inputs(url, lessons, own), clients.chat_fn_index(url)
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
    return figures | {"chats": len(chats), "chat_p95_gap_s": p95(gaps),
                      "chat_errors": sum(len(t["errors"]) for t in talk)}


def forged(url: str, presses: int = 100, spread_s: float = 5.0,
           lessons: tuple[str, ...] = LESSONS) -> dict:
    """A forger presses `presses` measurements within `spread_s`; a student presses one halfway."""
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
    """A forger floods `floods` chats within `spread_s`; then a student at the school asks a
    `new_tokens` question: its time to a complete answer."""
    fn = clients.chat_fn_index(url)
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
    """Chats and presses for `duration_s`, then `idle_s` of nothing: the app's (`pid`) RSS."""
    pick, fn = lesson_inputs(url, lessons, own=True), clients.chat_fn_index(url)
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
    """Every figure, each group on a fresh app: the keys `make bench` puts in `serving`."""
    announce(f"one school address: {students} students press the four lessons' Run with "
             f"defaults while {chats} chat, then each with their own settings")
    with start_app(BEHIND_PROXY) as app:
        room = class_of(app.url, students + chats)
        figures = {"cookies": sum(bool(s.cookies) for s in room),
                   "at_once": class_presses(app.url, room[:students], chats=room[students:],
                                            chat_tokens=new_tokens),
                   "own_settings": class_presses(app.url, room[:students], own=True)}
    announce("a script forging X-Forwarded-For: 100 measurements, then 100 chats")
    with start_app(BEHIND_PROXY) as app:
        figures |= {"forged": forged(app.url),
                    "chat_flood": chat_flood(app.url, new_tokens=new_tokens)}
    announce(f"chats while measuring: {measuring_chats} chats alone, then beside the KV race and "
             "the batch sweep")
    measuring = chats_while_measuring(measuring_chats, new_tokens)
    announce(f"soak: {soak_s:.0f} s of chats and a measurement every 30 s, then {idle_s:.0f} s "
             "idle")
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
    args = parser.parse_args()  # each option names one of measure_classroom's parameters
    return run_alone("classroom-results.json", TARGETS, lambda: measure_classroom(**vars(args)))


if __name__ == "__main__":
    main()
