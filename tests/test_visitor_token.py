"""Visitor tokens: issued signed, verified, refused when tampered with or from another process,
rate-limited per address on a fake clock (a class of 40 loads the page, a script minting 500 is
refused past the limit), and given with the page by the middleware. Named "fair" for `-k`."""
from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from classroom import visitor_token
from classroom.visitor_token import COOKIE, VisitorCookies, VisitorTokens, visitor_of
from inference.config import Settings

SCHOOL = "203.0.113.7"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _tokens(clock: Clock | None = None) -> VisitorTokens:
    s = Settings()
    return VisitorTokens(s.visitor_tokens_per_address, s.visitor_token_window_s,
                         clock=clock or Clock())


def test_fair_a_token_verifies_only_untampered_and_only_in_its_own_process():
    tokens, other = _tokens(), _tokens()
    token = tokens.issue(SCHOOL)
    token_id, sig = token.split(".")
    assert tokens.verify(token) == token_id and len(token) <= 64
    assert tokens.verify(f"{token_id}.{sig[::-1]}") is None  # a forged signature
    other_id = ("y" if token_id[0] == "x" else "x") + token_id[1:]  # never the same id
    assert tokens.verify(f"{other_id}.{sig}") is None  # another id under its signature
    assert other.verify(token) is None  # signed by another process (a restart): no token
    for junk in (None, "", "no-dot", "." * 70, token + "x", "a.b.c"):
        assert tokens.verify(junk) is None
    assert len({tokens.issue(f"192.0.2.{i}") for i in range(50)}) == 50  # each one new


def test_fair_a_class_of_40_gets_its_tokens_and_a_script_minting_500_is_refused_past_the_limit():
    clock, s = Clock(), Settings()
    tokens = _tokens(clock)
    limit = s.visitor_tokens_per_address
    assert s.class_size <= limit  # a class loading the page at once
    class_tokens = [tokens.issue(SCHOOL) for _ in range(s.class_size)]
    assert all(class_tokens)
    clock.now += 30
    minted = [tokens.issue(SCHOOL) for _ in range(500)]
    assert sum(t is not None for t in minted) == limit - s.class_size
    assert tokens.refused == 500 - (limit - s.class_size)
    assert tokens.issue("198.51.100.1") is not None  # another address is not held back
    clock.now += s.visitor_token_window_s - 31  # the class's issues are still in the window
    assert tokens.issue(SCHOOL) is None
    clock.now += 2  # the class's issues have left the window; the script's not yet
    assert sum(tokens.issue(SCHOOL) is not None for _ in range(500)) == s.class_size
    assert all(tokens.verify(t) for t in class_tokens)  # issued tokens stay valid


def test_fair_the_addresses_remembered_are_bounded():
    tokens = _tokens()
    for i in range(visitor_token.ADDRESSES_KEPT + 500):
        tokens.issue(f"10.{i // 65536}.{i // 256 % 256}.{i % 256}")
    assert len(tokens._issued) == visitor_token.ADDRESSES_KEPT


def _app(trusted_proxies: int = 1, per_address: int = 3) -> tuple[TestClient, VisitorTokens]:
    tokens = VisitorTokens(per_address, 600, clock=Clock())

    async def who(request: Request):
        return JSONResponse({"visitor": visitor_of(request, trusted_proxies)})

    app = Starlette(routes=[Route("/", lambda r: PlainTextResponse("page")),
                            Route("/who", who)])
    app.add_middleware(VisitorCookies, tokens=tokens, trusted_proxies=trusted_proxies)
    return TestClient(app), tokens


def test_fair_the_page_gives_a_cookie_and_later_requests_carry_the_visitor():
    client, tokens = _app()
    page = client.get("/", headers={"x-forwarded-for": SCHOOL})
    cookie = page.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert "Secure" not in cookie  # plain HTTP: a Secure cookie would never come back
    token = client.cookies[COOKIE]
    who = client.get("/who", headers={"x-forwarded-for": SCHOOL}).json()["visitor"]
    assert who == "v:" + tokens.verify(token)
    again = client.get("/", headers={"x-forwarded-for": SCHOOL})
    assert "set-cookie" not in again.headers  # a valid token: none minted
    assert client.get("/who").json()["visitor"] == who  # the token, wherever it comes from


def test_fair_no_token_or_a_tampered_one_is_counted_by_the_proxys_hop():
    client, _ = _app()
    forged = {"x-forwarded-for": f"198.51.100.9, {SCHOOL}"}
    assert client.get("/who", headers=forged).json()["visitor"] == f"a:{SCHOOL}"
    client.cookies.set(COOKIE, "abc.def")
    assert client.get("/who", headers=forged).json()["visitor"] == f"a:{SCHOOL}"
    assert "set-cookie" not in client.get("/who", headers=forged).headers  # not a page


def test_fair_over_https_behind_the_proxy_the_cookie_works_in_the_spaces_iframe():
    client, _ = _app()
    page = client.get("/", headers={"x-forwarded-for": SCHOOL, "x-forwarded-proto": "https"})
    cookie = page.headers["set-cookie"]
    assert "SameSite=None" in cookie and "Secure" in cookie and "Partitioned" in cookie
    untrusted, _ = _app(trusted_proxies=0)  # no proxy trusted: its proto header neither
    page = untrusted.get("/", headers={"x-forwarded-proto": "https"})
    assert "SameSite=Lax" in page.headers["set-cookie"]


def test_fair_past_the_limit_the_page_loads_without_a_token():
    client, tokens = _app(per_address=3)
    headers = {"x-forwarded-for": SCHOOL}
    pages = []
    for _ in range(5):
        client.cookies.clear()  # a script that never keeps its cookie
        pages.append(client.get("/", headers=headers))
    assert [p.status_code for p in pages] == [200] * 5
    assert ["set-cookie" in p.headers for p in pages] == [True] * 3 + [False] * 2
    assert client.get("/who", headers=headers).json()["visitor"] == f"a:{SCHOOL}"
    other = client.get("/", headers={"x-forwarded-for": "198.51.100.1"})
    assert "set-cookie" in other.headers and tokens.refused == 2


def test_fair_visitor_of_reads_a_handlers_gradio_request_else_the_address():
    """What a handler gets (a gr.Request around the queue join's request) carries the visitor
    the middleware found; a request it never saw is counted by its address."""
    import gradio as gr

    scope = {"type": "http", "client": ("10.16.3.80", 1234),
             "headers": [(b"x-forwarded-for", b"198.51.100.9, 203.0.113.7")]}
    assert visitor_of(Request(scope), 1) == "a:203.0.113.7"
    assert visitor_of(gr.Request(request=Request(scope)), 1) == "a:203.0.113.7"
    marked = Request({**scope, visitor_token.VISITOR: "v:abc"})
    assert visitor_of(gr.Request(request=marked, session_hash="s")) == "v:abc"


def test_try_its_chats_are_keyed_by_the_visitors_token_not_a_shared_address():
    from types import SimpleNamespace

    from classroom.visitor_token import VISITOR
    from lessons.chat_panel import visitor_key

    def request(scope: dict, host: str) -> SimpleNamespace:
        return SimpleNamespace(request=SimpleNamespace(scope=scope, headers={},
                                                       client=SimpleNamespace(host=host)))

    school = "203.0.113.7"  # one address, two students with their own tokens
    assert visitor_key(request({VISITOR: "v:one"}, school), 0) == "v:one"
    assert visitor_key(request({VISITOR: "v:two"}, school), 0) == "v:two"
    assert visitor_key(request({}, school), 0) == f"a:{school}"  # no token: its address
    assert visitor_key(request({}, "127.0.0.1"), 0) == ""  # this machine: never capped
    assert visitor_key(None, 0) == ""
