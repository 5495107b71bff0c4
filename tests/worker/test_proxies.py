"""Building ctx.proxy from config: fixed URLs, the template provider, entry points."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleet.core.config import BaseConfig
from fleet.core.errors import ConfigError
from fleet.worker.proxies import build_proxy


class Fixed:
    """A provider loaded through the entry point in the test below."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.host = config["host"]

    def url(self, *, session: str, country: str | None) -> str | None:
        return f"http://{country or 'any'}.{self.host}"


def test_fixed_urls_are_spread_over_slots() -> None:
    cfg = BaseConfig(proxy_url="http://a:1, http://b:1\nhttp://c:1")
    assert [build_proxy(cfg, i).url for i in range(4)] == [
        "http://a:1",
        "http://b:1",
        "http://c:1",
        "http://a:1",
    ]
    assert build_proxy(BaseConfig(), 0).url is None


async def test_template_provider_builds_sticky_sessions() -> None:
    cfg = BaseConfig(
        proxy_provider="template",
        proxy_provider_config={
            "template": "http://u-{session}-{country}:p@h:1",
            "default_country": "us",
        },
    )
    handle = build_proxy(cfg, 0)
    assert handle.url is not None and handle.url.endswith("-us:p@h:1")
    first = handle.url
    assert await handle.rotate() != first
    assert (await handle.set_country("de") or "").endswith("-de:p@h:1")


def test_bad_provider_config_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="template"):
        build_proxy(BaseConfig(proxy_provider="template"), 0)
    with pytest.raises(ConfigError, match="unknown proxy_provider 'nope'"):
        build_proxy(BaseConfig(proxy_provider="nope"), 0)


def test_provider_from_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dist = tmp_path / "proxyplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: proxyplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[fleet.proxy_providers]\nfixed = tests.worker.test_proxies:Fixed\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = BaseConfig(proxy_provider="fixed", proxy_provider_config={"host": "proxy.local"})
    assert build_proxy(cfg, 3).url == "http://any.proxy.local"
