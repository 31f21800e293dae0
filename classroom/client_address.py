"""Who is asking, by network address: the hop a trusted proxy added, never one the client chose.

`X-Forwarded-For: a, b, c` is a list that every proxy appends to: the address it saw connect
to it. Whatever stands left of the hops our own proxies added was written by the client, so it
proves nothing (one script could be a thousand visitors, or a school it is not). With
`trusted_proxies` = N proxies in front of the app, the visitor's address is the N-th entry from
the right (MDN's "trusted proxy count" method; Werkzeug's ProxyFix reads it the same way):

- N = 0 (the default: `make run`, the tests): the header is ignored; the address is the TCP
  peer as uvicorn reports it. (uvicorn itself replaces a *loopback* peer by the header's
  rightmost hop, its `forwarded_allow_ips` default: a proxy on this machine is trusted there.)
- N = 1: a Hugging Face Space. Checked: on a Space `request.client.host` is an internal
  address of Hugging Face's proxy (10.x) and the visitor's address arrives in
  X-Forwarded-For (embeddings-benchmark/mteb#4754, a leaderboard Space); the apps are served
  from *.hf.space behind that proxy (Hub docs, "Cookie limitations in Spaces"). Not checked:
  that exactly one hop is appended; to confirm on a deployed Space, send a forged first hop and
  see it kept left of your real address. Set LLM_LAB_TRUSTED_PROXIES=1 there.
- A header with fewer than N hops came past a proxy that appended nothing: the TCP peer is
  used (as ProxyFix does), never the client's entries.

A hop that is not an IP address (junk, "unknown", a 10 kB forgery) counts as missing. An IPv6
address is counted by its /64 prefix: one home or school network is given a whole /64, so a
single client can pick any of 2^64 addresses in it; an IPv4-mapped IPv6 address is its IPv4.

A visitor on this machine itself (a loopback peer, no trusted proxy: `make run` on a laptop,
the tests, the bench) is one person at the keyboard: `counted` leaves it uncapped, so a
30-client load test from localhost measures serving, not the per-address caps.

>>> client_address({"x-forwarded-for": "198.51.100.9, 203.0.113.7"}, "10.0.0.2", 1)
'203.0.113.7'
>>> client_address({"x-forwarded-for": "198.51.100.9"}, "192.0.2.10")  # no proxy: ignored
'192.0.2.10'
>>> client_address({"x-forwarded-for": "2001:db8:0:7::1"}, "10.0.0.2", 1)
'2001:db8:0:7::/64'
>>> counted(client_address({}, "127.0.0.1")), counted("203.0.113.7")
(False, True)
"""
from __future__ import annotations

import ipaddress
from collections.abc import Mapping

LOCAL = "local"  # the address given to a loopback peer when no proxy is trusted
MAX_HOP_CHARS = 64  # a hop longer than any address with a port is junk
MAX_HEADER_CHARS = 4_096  # only this much of a header's right end is read


def client_address(headers: Mapping[str, str], host: str | None,
                   trusted_proxies: int = 0) -> str:
    """The visitor's address: the hop the nearest of `trusted_proxies` proxies saw, else the
    peer's host (LOCAL for a loopback peer with no proxy trusted)."""
    if trusted_proxies > 0:
        hop = _hop(_forwarded(headers), trusted_proxies)
        if hop is not None:
            return hop
    host = (host or "").strip()
    if trusted_proxies == 0 and (not host or _loopback(host)):
        return LOCAL
    return _normal(host) or host[:MAX_HOP_CHARS] or "unknown"


def _forwarded(headers: Mapping[str, str]) -> str:
    """Every X-Forwarded-For line, in order, as one list (RFC 9110: repeated lines join)."""
    lines = headers.getlist("x-forwarded-for") if hasattr(headers, "getlist") else \
        [headers.get("x-forwarded-for") or ""]
    return ",".join(lines)[-MAX_HEADER_CHARS:]


def _hop(forwarded: str, n: int) -> str | None:
    """The n-th entry from the right, normalised; None when there are fewer or it is junk."""
    hops = forwarded.rsplit(",", n)  # at most n + 1 parts: the client's part stays joined
    if not forwarded.strip() or len(hops) < n:
        return None
    return _normal(hops[-n].strip())


def _normal(hop: str) -> str | None:
    """An address as counted: IPv4 as is, IPv6 as its /64; a port or brackets dropped."""
    if not hop or len(hop) > MAX_HOP_CHARS:
        return None
    if hop.startswith("["):  # "[2001:db8::1]:443"
        hop = hop[1:].split("]", 1)[0]
    elif hop.count(":") == 1:  # "203.0.113.7:51234"
        hop = hop.split(":", 1)[0]
    try:
        ip = ipaddress.ip_address(hop)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return (getattr(ip, "ipv4_mapped", None) or ip).is_loopback


def request_address(request, trusted_proxies: int = 0) -> str:
    """`client_address` of a Starlette/FastAPI request (or a gr.Request wrapping one)."""
    inner = getattr(request, "request", None) or request
    headers = getattr(inner, "headers", None) or {}
    client = getattr(inner, "client", None)
    return client_address(headers, getattr(client, "host", None), trusted_proxies)


def counted(address: str) -> bool:
    """Whether per-address caps apply (not to a visitor on this machine itself)."""
    return address != LOCAL
