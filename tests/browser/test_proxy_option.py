"""Proxy URLs as Playwright wants them (a pure function; no browser needed)."""

from __future__ import annotations

from fleet.browser.pool import proxy_option


def test_credentials_are_split_out_and_decoded() -> None:
    assert proxy_option("http://us%40er:p%3Ass@proxy.test:8080") == {
        "server": "http://proxy.test:8080",
        "username": "us@er",
        "password": "p:ss",
    }


def test_scheme_and_port_are_kept_and_missing_parts_left_out() -> None:
    assert proxy_option("socks5://10.0.0.1:1080") == {"server": "socks5://10.0.0.1:1080"}
    assert proxy_option("http://proxy.test") == {"server": "http://proxy.test"}
