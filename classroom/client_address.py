"""Who is asking: the client address that fairness is counted by, not the session hash.

A session hash is whatever the client sends, so one script can open twelve of them; an address
is harder to multiply. Behind a proxy (a Hugging Face Space) every request comes from the
proxy, which names the visitor in `X-Forwarded-For: visitor, proxy1, ...`: the first hop is the
visitor. Without that header the address is the TCP peer's.

A visitor on this machine itself (a loopback peer with no forwarding header: `make run` on a
laptop, the tests, the bench) is one person at the keyboard: `counted` leaves it uncapped, so
a 30-client load test from localhost measures serving, not the per-address cap.

>>> client_address({"x-forwarded-for": "203.0.113.7, 10.0.0.2"}, "10.0.0.2")
'203.0.113.7'
>>> client_address({}, "192.0.2.10")
'192.0.2.10'
>>> counted(client_address({}, "127.0.0.1")), counted("203.0.113.7")
(False, True)
"""
from __future__ import annotations

from collections.abc import Mapping

LOCAL = "local"  # the address given to a loopback peer that names no forwarded visitor
_LOOPBACK = ("127.", "::1", "localhost")


def client_address(headers: Mapping[str, str], host: str | None) -> str:
    """The visitor's address: X-Forwarded-For's first hop, else the peer's host (or LOCAL)."""
    forwarded = (headers.get("x-forwarded-for") or "").split(",")[0].strip()
    if forwarded:
        return forwarded[:64]  # an address, not a payload: a forged long header stays short
    host = (host or "").strip()
    if not host or host.startswith(_LOOPBACK):
        return LOCAL
    return host


def request_address(request) -> str:
    """`client_address` of a Starlette/FastAPI request (or a gr.Request wrapping one)."""
    inner = getattr(request, "request", None) or request
    headers = getattr(inner, "headers", None) or {}
    client = getattr(inner, "client", None)
    return client_address(headers, getattr(client, "host", None))


def counted(address: str) -> bool:
    """Whether per-address caps apply (not to a visitor on this machine itself)."""
    return address != LOCAL
