"""What ``fleet dev --demo`` loads, configures and submits so that work flows at once."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path
from typing import Any

import fleet

#: The example automations the demo runs (modules, loaded as ``--plugin``).
DEMO_PLUGINS = ("cf_cookie_harvester", "cf_scraper", "fleet_pinger", "inventory_sync")
#: Every example package directory under ``examples/`` the demo needs.
EXAMPLE_PACKAGES = ("cf-contracts", "cf-cookie-harvester", "cf-scraper", "pinger", "inventory-sync")
#: Seeded scrapes of these pages fail for good, to show the dead-letter queue.
BROKEN_SEED_PAGES = (13, 42, 77)
#: The identity pool the demo fills, one identity per local proxy (docs/identities.md).
DEMO_IDENTITY_POOL = "demo"
#: The demo identities' browsers, one per exit: fixed (nothing is drawn, nothing is
#: downloaded), each coherent in itself: its User-Agent, client hints, header order,
#: locale, timezone, viewport and platform name one browser on one system.
DEMO_FINGERPRINTS: tuple[dict[str, Any], ...] = (
    {
        "user_agent": (
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 "
            "(KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
        ),
        "headers": [
            ["sec-ch-ua", '"Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"'],
            ["sec-ch-ua-mobile", "?0"],
            ["sec-ch-ua-platform", '"Windows"'],
            ["Upgrade-Insecure-Requests", "1"],
            [
                "Accept",
                "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,"
                "image/webp,image/apng,*/*;q=0.8",
            ],
            ["Sec-Fetch-Site", "none"],
            ["Sec-Fetch-Mode", "navigate"],
            ["Sec-Fetch-User", "?1"],
            ["Sec-Fetch-Dest", "document"],
            ["Accept-Encoding", "gzip, deflate"],
            ["Accept-Language", "en-US,en;q=0.9"],
        ],
        "locale": "en-US",
        "timezone": "America/New_York",
        "viewport": {"width": 1536, "height": 730},
        "platform": "Win32",
    },
    {
        "user_agent": ("Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"),
        "headers": [
            ["Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"],
            ["Accept-Language", "de-DE,de;q=0.9,en-US;q=0.8,en;q=0.7"],
            ["Accept-Encoding", "gzip, deflate"],
            ["Upgrade-Insecure-Requests", "1"],
            ["Sec-Fetch-Dest", "document"],
            ["Sec-Fetch-Mode", "navigate"],
            ["Sec-Fetch-Site", "none"],
            ["Sec-Fetch-User", "?1"],
        ],
        "locale": "de-DE",
        "timezone": "Europe/Berlin",
        "viewport": {"width": 1920, "height": 955},
        "platform": "Linux x86_64",
    },
    {
        "user_agent": (
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 "
            "(KHTML, like Gecko) Version/18.1 Safari/605.1.15"
        ),
        "headers": [
            ["Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"],
            ["Sec-Fetch-Site", "none"],
            ["Sec-Fetch-Mode", "navigate"],
            ["Sec-Fetch-Dest", "document"],
            ["Accept-Language", "ja-JP,ja;q=0.9"],
            ["Accept-Encoding", "gzip, deflate"],
        ],
        "locale": "ja-JP",
        "timezone": "Asia/Tokyo",
        "viewport": {"width": 1440, "height": 788},
        "platform": "MacIntel",
    },
)


class DemoUnavailable(RuntimeError):
    """The example plugins are neither installed nor in a source checkout."""


def examples_dir() -> Path | None:
    """``examples/`` of the source checkout Fleet runs from, if there is one."""
    candidate = Path(fleet.__file__).resolve().parents[1] / "examples"
    return candidate if candidate.is_dir() else None


def demo_pythonpath() -> list[str]:
    """Source directories to add to ``PYTHONPATH`` for the examples that are not installed.

    Returns:
        ``[]`` when every demo module is importable already.

    Raises:
        DemoUnavailable: Some are missing and there is no ``examples/`` to take them from.
    """
    modules = ("cf_contracts", *DEMO_PLUGINS)
    if all(importlib.util.find_spec(m) is not None for m in modules):
        return []
    base = examples_dir()
    if base is None:
        raise DemoUnavailable(
            "the demo needs the example plugins: pip install -e examples/cf-contracts "
            "-e examples/cf-cookie-harvester -e examples/cf-scraper -e examples/pinger "
            "-e examples/inventory-sync (from a clone of the Fleet repository)"
        )
    return [str(base / name) for name in EXAMPLE_PACKAGES]


def demo_identities(proxy_urls: list[str]) -> dict[str, Any]:
    """The body of ``POST /api/v1/identities/demo``: one identity per local proxy
    (``demo-1``, ``demo-2``...), each with its own fingerprint, and no cookies yet."""
    return {
        "identities": [
            {
                "id": f"demo-{i + 1}",
                "proxy": url,
                "fingerprint": DEMO_FINGERPRINTS[i % len(DEMO_FINGERPRINTS)],
            }
            for i, url in enumerate(proxy_urls)
        ]
    }


def demo_configs(site_url: str) -> dict[str, dict[str, Any]]:
    """Type-wide config patches pointing the examples at the demo site; the harvester
    and the scraper lease the demo's identities (a block cools one down for 30 s)."""
    identities = {"identity_pool": DEMO_IDENTITY_POOL, "identity_cooldown_seconds": 30}
    return {
        "cf-cookie-harvester": {"slots": 1, **identities},
        "cf-scraper": {"slots": 3, **identities},
        "pinger": {"url": f"{site_url}/health", "interval_seconds": 2.0},
        "inventory-sync": {"api_url": f"{site_url}/api", "slots": 2},
    }


def _scrape(site_url: str, page: int, **options: Any) -> dict[str, Any]:
    return {"payload": {"url": f"{site_url}/products/{page}"}, **options}


def seed_tasks(
    site_url: str, rng: random.Random, harvests: int = 1
) -> dict[str, list[dict[str, Any]]]:
    """The first batch: ``harvests`` harvests (one per identity: each clears the identity
    it leases), pages 1..30, three broken pages that die fast (``max_attempts=2``), and
    a few stock checks.

    Returns:
        Submit bodies (as ``POST .../tasks/batch`` takes them) by automation type.
    """
    site = site_url.split("://", 1)[-1]
    pages = [p for p in range(1, 31) if p not in BROKEN_SEED_PAGES]
    scrapes = [_scrape(site_url, p) for p in pages]
    scrapes += [_scrape(site_url, p, max_attempts=2) for p in BROKEN_SEED_PAGES]
    rng.shuffle(scrapes)
    return {
        "cf-cookie-harvester": [{"payload": {"site": site}} for _ in range(harvests)],
        "cf-scraper": scrapes,
        "inventory-sync": [
            {"payload": {"sku": f"SKU-{rng.randint(1000, 9999)}"}} for _ in range(5)
        ],
    }


def feed_tasks(site_url: str, rng: random.Random) -> dict[str, list[dict[str, Any]]]:
    """A trickle of work for every few seconds: three pages and one stock check."""
    return {
        "cf-scraper": [_scrape(site_url, rng.randint(1, 100)) for _ in range(3)],
        "inventory-sync": [{"payload": {"sku": f"SKU-{rng.randint(1000, 9999)}"}}],
    }
