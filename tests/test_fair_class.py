"""A school behind one address is a class, not one abuser; a forged X-Forwarded-For gains
nothing. Through the real queue wrapper and the real middleware (`classroom.install`,
`classroom.middleware`) on a small gr.Blocks behind one trusted proxy, as on a Space: every
request carries the X-Forwarded-For that proxy would pass on (the client's own hops, then the
address it saw). Named "fair" for `-k`."""
from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field

import httpx
import pytest

from classroom.classroom_guard import ADDRESS_FULL, CLASS_HEAVY_FULL, HEAVY_FULL, VISITOR_FULL
from classroom.visitor_token import COOKIE
from inference.config import Settings

SCHOOL = "203.0.113.50"  # one NAT address for the whole class


@dataclass
class Student:
    """One browser behind the proxy: it loads the page (keeping the cookie it gets, if any),
    then presses buttons, each press from a tab of its own (a session hash)."""

    url: str
    address: str
    token: str | None = None
    forged: list[str] = field(default_factory=list)  # first hops the client writes itself

    def headers(self) -> dict[str, str]:
        hops = ", ".join([*self.forged, self.address])  # the proxy appends what it saw
        cookie = {"cookie": f"{COOKIE}={self.token}"} if self.token else {}
        return {"x-forwarded-for": hops, **cookie}

    def load(self) -> bool:
        page = httpx.get(self.url, headers=self.headers(), timeout=30)
        assert page.status_code == 200
        self.token = page.cookies.get(COOKIE) or self.token
        return COOKIE in page.cookies

    def press(self, fn_index: int, value: int) -> httpx.Response:
        body = {"data": [value], "fn_index": fn_index, "event_data": None, "trigger_id": None,
                "session_hash": f"class-{uuid.uuid4().hex[:10]}"}
        return httpx.post(self.url + "gradio_api/queue/join", json=body, timeout=30,
                          headers=self.headers())


@pytest.fixture
def start():
    """Starts a small app with one heavy measurement that holds until the test ends, with the
    class's limits installed as app.py installs them, behind one trusted proxy."""
    from types import SimpleNamespace

    import gradio as gr

    import classroom
    from bench.app_server import free_port
    from lessons.common.context import AppContext
    from lessons.common.measurement import Measurement
    from lessons.common.measurement_wiring import wire_measurement

    release, started = threading.Event(), []

    def hold(n):
        yield f"measuring {n}"
        release.wait(120)
        yield f"measured {n}"

    def launch(settings: Settings):
        runs = classroom.SharedRuns(settings.shared_run_reuse_s)
        ctx = AppContext(SimpleNamespace(device="cpu"), settings, runs=runs)
        with gr.Blocks() as demo:
            number, text = gr.Number(1, precision=0), gr.Markdown()
            wire_measurement(gr.Button("measure"), [number], [text],
                             Measurement("measure", hold, work=lambda n: n), ctx)
            gr.Button("wait").click(hold, number, text, api_name="wait",
                                    concurrency_limit=None)  # a held event, in no heavy lane
        demo.queue(default_concurrency_limit=2)
        assert classroom.install(demo, settings, classroom.Fairness(settings, runs))
        port = free_port()
        demo.launch(server_port=port, prevent_thread_lock=True, quiet=True,
                    app_kwargs={"middleware": classroom.middleware(settings)})
        started.append(demo)
        measure, wait = (next(i for i, f in demo.fns.items() if f.api_name == name)
                         for name in ("measure", "wait"))
        return demo, f"http://127.0.0.1:{port}/", measure, wait

    try:
        yield launch
    finally:
        release.set()
        for demo in started:
            demo.close()


def _heavy_from(demo, address: str) -> int:
    """Measurements waiting or running whose proxy-added hop is `address`."""
    queue = demo._queue
    events = [e for lane in queue.event_queue_per_concurrency_id.values() for e in lane.queue]
    events += [e for job in queue.active_jobs if job for e in job]
    return sum(e.request.headers.get("x-forwarded-for", "").rsplit(",", 1)[-1].strip()
               == address for e in events)


def test_fair_thirty_students_behind_one_address_each_get_a_measurement(start):
    demo, url, measure, _ = start(Settings(trusted_proxies=1))
    students = [Student(url, SCHOOL) for _ in range(30)]
    assert all(s.load() for s in students)  # every page load gives a token
    assert len({s.token for s in students}) == 30
    replies = [s.press(measure, 10 + i) for i, s in enumerate(students)]
    assert [r.status_code for r in replies] == [200] * 30, [r.text for r in replies
                                                            if r.status_code != 200][:2]
    assert _heavy_from(demo, SCHOOL) == 30
    again = students[0].press(measure, 99)  # a second tab of the same student: one share each
    assert again.status_code == 503
    assert again.json()["detail"] == HEAVY_FULL.format(n=1)
    reload = httpx.get(url, headers=students[0].headers(), timeout=30)
    assert COOKIE not in reload.cookies  # a valid token: the reload mints none


def test_fair_a_client_forging_x_forwarded_for_gets_one_visitors_share(start):
    demo, url, measure, _ = start(Settings(trusted_proxies=1))
    forger = Student(url, "198.51.100.77")  # no page load: a script, no token
    replies = []
    for i in range(20):
        forger.forged = [f"192.0.2.{i}"]  # a new "visitor" on every request
        replies.append(forger.press(measure, 200 + i))
    assert [r.status_code for r in replies].count(200) == 1
    assert "measurement(s) running or waiting" in replies[1].json()["detail"]
    assert _heavy_from(demo, "198.51.100.77") == 1
    forger.forged = [SCHOOL]  # impersonating the school spends nothing of the school's share
    assert forger.press(measure, 300).status_code == 503
    student = Student(url, SCHOOL)
    assert student.load() and student.press(measure, 301).status_code == 200


def test_fair_a_script_minting_tokens_holds_at_most_a_class(start):
    """A small class (5) and token allowance (12), so the address's ceiling is what binds."""
    settings = Settings(trusted_proxies=1, class_size=5, visitor_tokens_per_address=12)
    demo, url, measure, _ = start(settings)
    script = "198.51.100.88"
    minted = []
    for _ in range(30):  # loads the page, never keeping a cookie
        page = Student(url, script)
        if page.load():
            minted.append(page)
    assert len(minted) == settings.visitor_tokens_per_address
    replies = [s.press(measure, 400 + i) for i, s in enumerate(minted)]
    admitted = [r for r in replies if r.status_code == 200]
    assert len(admitted) == settings.class_size * settings.client_heavy_jobs
    refused = {r.json()["detail"] for r in replies if r.status_code == 503}
    assert refused == {CLASS_HEAVY_FULL.format(n=settings.class_size, size=settings.class_size)}
    other = Student(url, "198.51.100.89")
    assert other.load() and other.press(measure, 500).status_code == 200  # room for others


def test_fair_events_are_capped_per_visitor_and_per_address_only_at_a_class(start):
    """Small caps (8 a visitor, 12 an address) so the test holds few events: a visitor's tabs
    together stop at its own cap, a second visitor at the school at the address's ceiling, and
    a visitor elsewhere is not held back by either."""
    settings = Settings(trusted_proxies=1, client_events=8, address_events=12)
    _, url, _, wait = start(settings)
    first, second = Student(url, SCHOOL), Student(url, SCHOOL)
    assert first.load() and second.load()
    mine = [first.press(wait, i) for i in range(12)]  # twelve tabs: under the per-tab cap
    assert [r.status_code for r in mine] == [200] * 8 + [503] * 4
    assert mine[-1].json()["detail"] == VISITOR_FULL.format(n=8)
    theirs = [second.press(wait, i) for i in range(8)]
    assert [r.status_code for r in theirs] == [200] * 4 + [503] * 4
    assert theirs[-1].json()["detail"] == ADDRESS_FULL.format(n=12)
    elsewhere = Student(url, "198.51.100.99")
    assert elsewhere.press(wait, 1).status_code == 200
