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


def demo_configs(site_url: str) -> dict[str, dict[str, Any]]:
    """Type-wide config patches pointing the examples at the demo site."""
    return {
        "cf-cookie-harvester": {"slots": 1, "cookies_per_site": 4},
        "cf-scraper": {"slots": 3},
        "pinger": {"url": f"{site_url}/health", "interval_seconds": 2.0},
        "inventory-sync": {"api_url": f"{site_url}/api", "slots": 2},
    }


def _scrape(site_url: str, page: int, **options: Any) -> dict[str, Any]:
    return {"payload": {"url": f"{site_url}/products/{page}"}, **options}


def seed_tasks(site_url: str, rng: random.Random) -> dict[str, list[dict[str, Any]]]:
    """The first batch: a harvest, pages 1..30, three broken pages that die fast
    (``max_attempts=2``), and a few stock checks.

    Returns:
        Submit bodies (as ``POST .../tasks/batch`` takes them) by automation type.
    """
    site = site_url.split("://", 1)[-1]
    pages = [p for p in range(1, 31) if p not in BROKEN_SEED_PAGES]
    scrapes = [_scrape(site_url, p) for p in pages]
    scrapes += [_scrape(site_url, p, max_attempts=2) for p in BROKEN_SEED_PAGES]
    rng.shuffle(scrapes)
    return {
        "cf-cookie-harvester": [{"payload": {"site": site}}],
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
