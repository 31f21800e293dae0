"""Who is asking, per person: a visitor token the server signs and gives with the page.

A session hash is chosen by the client (one script can send a thousand), and a network address
is shared by a whole school behind one NAT. So each visitor gets a token of the server's own
making with the page: a random id and its HMAC under a secret made when the process starts
(`secrets.token_bytes`), sent as an HttpOnly cookie. A token the server did not sign, or signed
in another process, is no token. Fairness is then counted per token, `visitor_of(request)`:
"v:<token id>", or "a:<address>" for a request without a valid one (an API script, a browser
refusing the cookie): everyone without a token at one address shares one visitor's share.

Minting is the attack left: a script could load the page 500 times for 500 tokens. So new
tokens are rate-limited per address (`Settings.visitor_tokens_per_address` per
`visitor_token_window_s`: 60 per 10 minutes, so a class of 40 loading the page at once, and
reloading, gets its tokens); past the limit a page still loads, with no new token, and its
requests are counted by address. The per-address ceilings (`classroom_guard`) bound what even
a script holding many tokens may have in line.

The cookie is `SameSite=Lax` over plain HTTP (this machine). Over HTTPS (a Space, told by the
trusted proxy's X-Forwarded-Proto) it is `SameSite=None; Secure; Partitioned`: a Space's page
is an iframe on huggingface.co serving the app from *.hf.space, and browsers send a Lax cookie
to no cross-site iframe (Hub docs, "Cookie limitations in Spaces"; Gradio's own login cookie is
SameSite=None for the same reason). A browser that blocks even partitioned third-party cookies
sends none: its visitor is counted by address. The token only counts a share, it grants
nothing, so a page elsewhere that makes a visitor's browser send it gains that page nothing.

>>> tokens = VisitorTokens(per_address=2, window_s=600, clock=lambda: 0.0)
>>> first = tokens.issue("203.0.113.7")
>>> tokens.verify(first) == first.split(".")[0]
True
>>> tokens.verify(first[:-1] + ("A" if first[-1] != "A" else "B"))  # tampered: no token
>>> tokens.issue("203.0.113.7") is not None, tokens.issue("203.0.113.7")  # the third: refused
(True, None)
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from starlette.datastructures import Headers

from .client_address import client_address, request_address

COOKIE = "llm_lab_visitor"
VISITOR = "llm_lab.visitor"  # the ASGI scope key the middleware writes the visitor under
MAX_TOKEN_CHARS = 64
ADDRESSES_KEPT = 10_000  # addresses whose recent issues are remembered (oldest dropped)


class VisitorTokens:
    """Issues and verifies signed visitor tokens; new ones at most `per_address` per
    `window_s` seconds per address. One instance per process (its secret dies with it)."""

    def __init__(self, per_address: int, window_s: float,
                 clock: Callable[[], float] = time.monotonic, secret: bytes | None = None) -> None:
        self.per_address, self.window_s, self.clock = per_address, window_s, clock
        self._secret = secret or secrets.token_bytes(32)
        self._issued: OrderedDict[str, deque[float]] = OrderedDict()  # address -> issue times
        self.refused = 0  # issues refused past the limit, since start

    def _signed(self, token_id: str) -> str:
        mac = hmac.digest(self._secret, token_id.encode(), hashlib.sha256)[:16]
        return f"{token_id}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"

    def issue(self, address: str) -> str | None:
        """A new token for a visitor at `address`, or None past the address's limit."""
        now = self.clock()
        times = self._issued.pop(address, deque())
        while times and times[0] <= now - self.window_s:
            times.popleft()
        self._issued[address] = times  # now the most recent address
        if len(times) >= self.per_address:
            self.refused += 1
            return None
        times.append(now)
        while len(self._issued) > ADDRESSES_KEPT:
            self._issued.popitem(last=False)
        return self._signed(secrets.token_urlsafe(9))

    def verify(self, token: str | None) -> str | None:
        """The token's id if this process signed it, else None."""
        if not token or len(token) > MAX_TOKEN_CHARS or "." not in token:
            return None
        token_id = token.split(".", 1)[0]
        return token_id if hmac.compare_digest(self._signed(token_id), token) else None


def visitor_of(request, trusted_proxies: int = 0) -> str:
    """The fairness key of a request (Starlette, FastAPI, or a gr.Request wrapping one):
    "v:<token id>" for a valid visitor token, else "a:<address>". In a handler, pass its
    gr.Request: the middleware has marked it, so `trusted_proxies` matters only for a request
    the middleware never saw (then its address is read here)."""
    inner = getattr(request, "request", None) or request
    scope = getattr(inner, "scope", None) or {}
    return scope.get(VISITOR) or "a:" + request_address(request, trusted_proxies)


def _cookie(header: str) -> str | None:
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value.strip('"')
    return None


class VisitorCookies:
    """ASGI middleware: every request is marked with its visitor (`visitor_of` reads it); a
    page load without a valid token gets a new one as a cookie, while its address may."""

    def __init__(self, app, tokens: VisitorTokens, trusted_proxies: int = 0) -> None:
        self.app, self.tokens, self.trusted_proxies = app, tokens, trusted_proxies

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        address = client_address(headers, (scope.get("client") or (None,))[0],
                                 self.trusted_proxies)
        token_id = self.tokens.verify(_cookie("; ".join(headers.getlist("cookie"))))
        new = None
        if token_id is None and self._page(scope):
            new = self.tokens.issue(address)
            token_id = None if new is None else new.split(".", 1)[0]
        scope[VISITOR] = f"v:{token_id}" if token_id else f"a:{address}"
        if new is None:
            await self.app(scope, receive, send)
            return
        cookie = f"{COOKIE}={new}; Path=/; HttpOnly; " + (
            "SameSite=None; Secure; Partitioned" if self._https(scope, headers)
            else "SameSite=Lax")

        async def with_cookie(message):
            if message.get("type") == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"set-cookie", cookie.encode())]}
            await send(message)

        await self.app(scope, receive, with_cookie)

    @staticmethod
    def _page(scope) -> bool:
        """A load of the app's page (GET of its root path)."""
        root = (scope.get("root_path") or "").rstrip("/")
        return scope.get("method") == "GET" and scope.get("path", "").rstrip("/") in ("", root)

    def _https(self, scope, headers: Headers) -> bool:
        proto = headers.get("x-forwarded-proto", "").rsplit(",", 1)[-1].strip().lower()
        return scope.get("scheme") == "https" or (self.trusted_proxies > 0 and proto == "https")
