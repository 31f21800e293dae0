"""A class behind one school address, as the app on a Space sees it: students, their presses,
and the figures a press leaves (`bench/classroom.py` runs the scenarios).

A Space's proxy appends the address it saw to `X-Forwarded-For`, and the app, started with
`LLM_LAB_TRUSTED_PROXIES=1`, counts that hop, never the ones a client wrote itself
(`classroom/client_address.py`). Every bench client comes from 127.0.0.1, so the bench plays the
proxy: each request carries `X-Forwarded-For: <what the client wrote, if anything>, <address>`.
A whole class sits behind one school address (`SCHOOL`, from 198.18.0.0/15, the range set
aside for benchmarks, RFC 2544), as most schools reach the internet through one NAT address.

A `Student` is one browser: it loads the page first (`load`), keeps the cookies the app sets
(its signed visitor token, `classroom/visitor_token.py`) in a jar of its own and sends them with
every queue request, so the app counts each student as a visitor of their own. A forger
(`forges=True`) is a script: no page, no cookie, and a new made-up first hop on every request
(from 100.64.0.0/10), left of the address the proxy appends.

Students speak Gradio's queue protocol through the bench's light client
(`bench.gradio_stream.call`). A press's stamps: sent, first message (the queue took it), first
update (its place in line, or its run's own progress), its turn (the first update after
waiting that no longer shows its place), its final output.
"""
from __future__ import annotations

import ipaddress
import itertools
import json
import threading
import time
from dataclasses import dataclass, field

from bench.gradio_stream import (
    CHAT_TOKENS,
    app_config,
    call,
    cookie_header,
    endpoint_data,
    page_cookies,
)
from inference.stats import percentile

LESSONS = ("/prefill_sweep", "/kv_race", "/batch_sweep", "/quant_compare")
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


@dataclass
class Student:
    """One browser behind the school's proxy (or a forging script: `forges`)."""

    url: str
    address: str | None = SCHOOL  # the hop the proxy appends (None: no proxy, a local client)
    forges: bool = False  # writes a new first hop of its own on every request
    cookies: dict[str, str] = field(default_factory=dict)  # this browser's own jar
    _hops: itertools.count = field(default_factory=itertools.count)

    def headers(self) -> dict:
        """This request's headers, as they reach the app past the proxy."""
        if self.address is None:
            return cookie_header(self.cookies)
        hops = self.address
        if self.forges:
            hops = f"{FORGED_FROM + next(self._hops)}, {self.address}"
        return {"X-Forwarded-For": hops, **cookie_header(self.cookies)}

    def load(self) -> bool:
        """Load the page, keeping the cookies it sets; True when this student holds a token."""
        self.cookies.update(page_cookies(self.url, self.headers))
        return COOKIE in self.cookies


def class_of(url: str, n: int, address: str = SCHOOL) -> list[Student]:
    """`n` students at `address`, each having loaded the page (in turn, as a room does)."""
    students = [Student(url, address) for _ in range(n)]
    for s in students:
        s.load()
    return students


def own_inputs(config: dict, api_name: str, rank: int) -> tuple[int, list]:
    """The endpoint's inputs with student `rank`'s own settings: its first slider `rank` steps
    below the page's value (wrapping within its range, so the work stays within the default's)
    and its last number box (the lessons' guess) `rank + 1`: no two ranks press the same."""
    index, data = endpoint_data(config, api_name.strip("/"), {})
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


class Stamps:
    """A press's messages as they arrive: the first (`began`), the first update (`first`),
    whether it waited in line, and its turn (the first update after waiting without its place)."""

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
    """At perf_counter `at`, `student` presses the button; wait for the final output; time it
    (a refused press: `refused`, with the app's sentence in `error`). `seen`: its stamps, for
    a caller watching the press while it runs."""
    time.sleep(max(0.0, at - time.perf_counter()))
    seen, t0 = seen or Stamps(), time.perf_counter()
    lesson = api_name.strip("/")
    try:
        outputs = call(student.url, *endpoint, timeout_s=RESULT_WAIT_S, headers=student.headers,
                       on_message=seen)
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


def result_figures(presses: list[dict]) -> dict:
    """Per lesson: p95 seconds to a result (None where none came), how many were shared; the
    worst p95 of the lessons and the p95 of all; presses refused, presses that ended without a
    result otherwise (errors), and the first few reasons."""
    lessons = sorted({p["lesson"] for p in presses})
    p95, n_shared = {}, {}
    for lesson in lessons:
        ok = [p for p in presses if p["lesson"] == lesson and p["ok"]]
        p95[lesson] = percentile([p["result_s"] for p in ok], 95) if ok else None
        n_shared[lesson] = sum(p["shared"] for p in ok)
    got = [v for v in p95.values() if v is not None]
    every = [p["result_s"] for p in presses if p["ok"]]
    refused = sum(bool(p.get("refused")) for p in presses)
    return {"p95_result_s": p95, "worst_p95_result_s": max(got) if got else None,
            "all_p95_result_s": percentile(every, 95) if every else None,
            "refused": refused, "errors": sum(not p["ok"] for p in presses) - refused,
            "shared_results": n_shared,
            "error_messages": [p["error"] for p in presses if "error" in p][:5]}


def line_figures(presses: list[dict], jitter_s: float = JITTER_S) -> dict:
    """How the line answered: p95 seconds from a press to its first update (its place, or its
    run's progress), how many were told a place, and whether the results came in the order the
    class pressed (`out_of_order`: presses whose result came more than `jitter_s` before that
    of one pressed more than `jitter_s` ahead of them; closer than that, two presses reach the
    app, and two results their browsers, in the network's order)."""
    firsts = [p["first"] - p["start"] for p in presses if p.get("first") is not None]
    ok = [p for p in presses if p["ok"]]
    t0 = min((p["start"] for p in ok), default=0.0)
    late = [(b, a) for b in ok for a in ok
            if a["start"] < b["start"] - jitter_s and b["end"] < a["end"] - jitter_s]
    late = list({id(b): (b, a) for b, a in late}.values())  # one pair per late press
    return {"p95_first_update_s": percentile(firsts, 95) if firsts else None,
            "no_first_update": len(presses) - len(firsts),
            "told_place": sum(bool(p.get("waited")) for p in presses),
            "in_queue_order": bool(ok) and not late, "out_of_order": len(late),
            "out_of_order_examples": [  # seconds from the first press
                f"{b['lesson']} pressed at {b['start'] - t0:.2f} s, answered at "
                f"{b['end'] - t0:.2f} s, before {a['lesson']} pressed at {a['start'] - t0:.2f} s "
                f"(answered at {a['end'] - t0:.2f} s)" for b, a in late[:3]]}


def peak_in_line(presses: list[dict], jitter_s: float = JITTER_S) -> int:
    """The most accepted presses in the app's queue at once: each from its first message to its
    final output; one that began within `jitter_s` of another's end is counted after it."""
    edges = sorted([(p["began"], 1) for p in presses if p.get("began") is not None]
                   + [(p["end"] - jitter_s, -1) for p in presses if p.get("began") is not None])
    peak = now = 0
    for _, step in edges:  # at equal times the end (-1) sorts first
        now += step
        peak = max(peak, now)
    return peak


def update_gaps(answers: list[list[float]], start: float, end: float) -> list[float]:
    """Gaps between consecutive stamps of each answer ([submit, update, update, ...]) that
    overlap the window [start, end]: what a chatting student waited for the next update."""
    return [b - a for stamps in answers for a, b in zip(stamps, stamps[1:])
            if b >= start and a <= end]


def chat(student: Student, fn_index: int, prompt: str, new_tokens: int,
         stamps: list[float] | None = None, at: float = 0.0) -> dict:
    """One chat from `student` sent at perf_counter `at`, start to end: ok (the app counted its
    tokens), seconds, tokens; or ok=False with why."""
    time.sleep(max(0.0, at - time.perf_counter()))
    t0 = time.perf_counter()
    try:
        outputs = call(student.url, fn_index, [prompt, new_tokens], timeout_s=RESULT_WAIT_S,
                       headers=student.headers, stamps=stamps)
        m = CHAT_TOKENS.search(str(outputs[1:2]))
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


def lesson_inputs(url: str, lessons: tuple[str, ...], own: bool):
    """student i -> (api name, its endpoint): lessons in turn, the page's defaults or, with
    `own`, the student's own settings (`own_inputs`, by its rank among that lesson's)."""
    config = app_config(url)  # as every student's page reads it first
    defaults = {api: endpoint_data(config, api.strip("/"), {}) for api in lessons}

    def pick(i: int) -> tuple[str, tuple[int, list]]:  # student i: lesson i % n, rank i // n
        api = lessons[i % len(lessons)]
        return api, own_inputs(config, api, i // len(lessons)) if own else defaults[api]
    return pick
