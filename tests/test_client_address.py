"""The visitor's address on hand-made header sets: 0, 1 and 2 trusted proxies, forged first
hops, IPv6, junk. Named "fair" for `-k`."""
from __future__ import annotations

import pytest
from starlette.datastructures import Headers

from classroom.client_address import LOCAL, client_address, counted, request_address
from inference.config import Settings

PROXY = "10.16.3.80"  # the peer a Space's app sees: its proxy, on an internal network


def xff(value: str) -> dict[str, str]:
    return {"x-forwarded-for": value}


def test_fair_no_trusted_proxy_ignores_the_header():
    assert client_address(xff("203.0.113.7"), "192.0.2.4") == "192.0.2.4"
    assert client_address(xff("203.0.113.7, 198.51.100.1"), "192.0.2.4", 0) == "192.0.2.4"
    assert client_address({}, "127.0.0.1") == client_address({}, "::1") == LOCAL
    assert client_address(xff("203.0.113.7"), "127.0.0.1") == LOCAL  # still this machine
    assert client_address({}, None) == client_address({}, "localhost") == LOCAL
    assert counted("192.0.2.4") and not counted(LOCAL)


def test_fair_one_trusted_proxy_reads_the_hop_it_appended():
    assert client_address(xff("203.0.113.7"), PROXY, 1) == "203.0.113.7"
    # Forged first hops (one, many, a school's address) stay left of the proxy's hop.
    assert client_address(xff("198.51.100.1, 203.0.113.7"), PROXY, 1) == "203.0.113.7"
    assert client_address(xff("1.1.1.1, 2.2.2.2, 3.3.3.3, 203.0.113.7"), PROXY, 1) \
        == "203.0.113.7"
    assert {client_address(xff(f"198.51.100.{i}, 203.0.113.7"), PROXY, 1)
            for i in range(100)} == {"203.0.113.7"}
    # The proxy's hop is what counts, not the peer (the proxy itself).
    assert client_address(xff("203.0.113.7"), "127.0.0.1", 1) == "203.0.113.7"


def test_fair_two_trusted_proxies_read_the_second_hop_from_the_right():
    chain = "198.51.100.1, 203.0.113.7, 10.0.0.5"  # forged, visitor (seen by the CDN), CDN
    assert client_address(xff(chain), PROXY, 2) == "203.0.113.7"
    assert client_address(xff("203.0.113.7, 10.0.0.5"), PROXY, 2) == "203.0.113.7"
    # Fewer hops than proxies: something skipped a proxy; the TCP peer, not a client entry.
    assert client_address(xff("203.0.113.7"), PROXY, 2) == PROXY
    assert client_address({}, PROXY, 1) == PROXY
    assert client_address(xff(""), PROXY, 1) == PROXY


def test_fair_repeated_header_lines_join_in_order():
    headers = Headers(raw=[(b"x-forwarded-for", b"198.51.100.1"),
                           (b"x-forwarded-for", b"203.0.113.7")])
    assert client_address(headers, PROXY, 1) == "203.0.113.7"
    assert client_address(headers, PROXY, 2) == "198.51.100.1"


def test_fair_ipv6_counts_by_its_64_prefix_and_mapped_ipv4_as_ipv4():
    one = client_address(xff("2001:db8:0:7::1"), PROXY, 1)
    assert one == "2001:db8:0:7::/64"
    assert client_address(xff("2001:DB8:0:7:ffff:1:2:3"), PROXY, 1) == one  # same network
    assert client_address(xff("2001:db8:0:8::1"), PROXY, 1) != one
    assert client_address(xff("[2001:db8:0:7::9]:443"), PROXY, 1) == one
    assert client_address(xff("::ffff:203.0.113.7"), PROXY, 1) == "203.0.113.7"
    assert client_address(xff("203.0.113.7:51234"), PROXY, 1) == "203.0.113.7"
    assert client_address({}, "2001:db8:0:7::1") == one  # the TCP peer, no proxy


@pytest.mark.parametrize("junk", ["unknown", "x" * 10_000, "203.0.113.999", "<script>",
                                  "1.2.3.4; drop", "203.0.113.7 198.51.100.1"])
def test_fair_a_junk_hop_counts_as_missing(junk):
    assert client_address(xff(junk), PROXY, 1) == PROXY
    assert client_address(xff("x" * 100_000 + ", 203.0.113.7"), PROXY, 1) == "203.0.113.7"
    assert len(client_address(xff(junk), "y" * 10_000, 1)) <= 64


def test_fair_request_address_reads_a_starlette_request_with_the_settings_count():
    from starlette.requests import Request

    scope = {"type": "http", "headers": [(b"x-forwarded-for", b"1.1.1.1, 203.0.113.7")],
             "client": (PROXY, 1234)}
    request = Request(scope)
    assert request_address(request, 1) == "203.0.113.7"
    assert request_address(request) == PROXY
    assert Settings().trusted_proxies == 0  # locally: no proxy is trusted


def test_fair_trusted_proxies_from_the_environment(monkeypatch):
    monkeypatch.setenv("LLM_LAB_TRUSTED_PROXIES", "1")
    assert Settings.from_env().trusted_proxies == 1
    monkeypatch.setenv("LLM_LAB_TRUSTED_PROXIES", "junk")
    assert Settings.from_env().trusted_proxies == 0
