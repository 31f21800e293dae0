"""Stop answered cleanly (`classroom/cancels.py`): a Stop sent before its event had an id
is a plain 200, and a Stop of a streaming answer ends it with a completion message the page
can read (`data: []`, "no output changed"): Gradio's own said `{}`, the page threw on it and
left the answer marked "Error" whenever that message landed after `/reset`'s reply. First on
a small ASGI app, then on the running app through its raw queue stream, as the page sees it."""
from __future__ import annotations

import json
import threading

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from classroom.cancels import NOTHING_TO_CANCEL, CleanCancels


async def not_gradio(request):
    return JSONResponse({"route": "reached"})


def small_app() -> TestClient:
    app = Starlette(routes=[Route("/gradio_api/cancel", not_gradio, methods=["POST"])],
                    middleware=[Middleware(CleanCancels)])
    return TestClient(app)


def test_a_stop_before_the_event_had_an_id_is_not_an_error(server):
    client = small_app()
    reply = client.post("/cancel", json={"event_id": None, "session_hash": "s", "fn_index": 0})
    assert reply.status_code == 200 and reply.json() == NOTHING_TO_CANCEL
    # an app that is not Gradio's: the cancel reaches its own route
    passed = client.post("/gradio_api/cancel", json={"event_id": "e1", "session_hash": "s",
                                                     "fn_index": 0})
    assert passed.json() == {"route": "reached"}
    for route, body in (("gradio_api/cancel", {"event_id": None, "session_hash": "s",
                                               "fn_index": 0}),
                        ("gradio_api/reset", {"event_id": None})):
        reply = httpx.post(server.url + route, json=body, timeout=30)
        assert reply.status_code == 200 and reply.json() == NOTHING_TO_CANCEL, reply.text
    real = httpx.post(server.url + "gradio_api/reset", json={"event_id": "no-such-event"},
                      timeout=30)
    assert real.status_code == 200 and real.json() != NOTHING_TO_CANCEL, real.text
    unknown = httpx.post(server.url + "gradio_api/cancel", timeout=30,
                         json={"event_id": "no-such-event", "session_hash": "nobody",
                               "fn_index": 0})
    assert unknown.status_code == 200 and unknown.json() == {"success": True}, unknown.text


def chat_fn_index(url: str) -> int:
    deps = httpx.get(url + "config", timeout=30).json()["dependencies"]
    return next(d["id"] for d in deps if d.get("api_name") == "chat")


def test_stopping_a_streaming_answer_completes_it_with_readable_data(server):
    url, session = server.url, "cancel-test-session"
    fn = chat_fn_index(url)
    joined = httpx.post(url + "gradio_api/queue/join", timeout=30, json={
        "data": ["Tell me a long story about a lighthouse.", 200], "fn_index": fn,
        "session_hash": session, "event_id": None, "trigger_id": None})
    assert joined.status_code == 200, joined.text
    event_id = joined.json()["event_id"]
    seen: list[dict] = []
    body = {"event_id": event_id, "session_hash": session, "fn_index": fn}
    replies: list[httpx.Response] = []

    def stop() -> None:
        replies.append(httpx.post(url + "gradio_api/cancel", json=body, timeout=120))

    # Stop pressed twice at once (a double click, two tabs of one visitor)
    stops = [threading.Thread(target=stop) for _ in range(2)]
    with httpx.stream("GET", url + "gradio_api/queue/data", timeout=120,
                      params={"session_hash": session}) as stream:
        for line in stream.iter_lines():
            if not line.startswith("data:"):
                continue
            msg = json.loads(line[5:])
            if msg.get("event_id") != event_id:
                continue
            seen.append(msg)
            if sum(m.get("msg") == "process_generating" for m in seen) == 3 and not stops[0].ident:
                for t in stops:
                    t.start()
            if msg.get("msg") == "process_completed":
                break
    for t in stops:
        t.join(120)
    assert [r.status_code for r in replies] == [200, 200], [r.text for r in replies]
    done = seen[-1]
    assert done["msg"] == "process_completed" and done["success"] is True, done
    assert done["output"].get("data") == [], done  # Gradio's own said {}: the page threw
    # the stream stopped at the Stop: no more tokens after it than a step or two
    generating = [m for m in seen if m.get("msg") == "process_generating"]
    assert len(generating) < 20, len(generating)
