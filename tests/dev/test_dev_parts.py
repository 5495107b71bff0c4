"""The pure parts of ``fleet dev``: arguments, environment, demo seeds, output lines."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.core.identities import parse_identity
from fleet.dev.demo_seed import (
    BROKEN_SEED_PAGES,
    DEMO_IDENTITY_POOL,
    DEMO_PLUGINS,
    demo_configs,
    demo_identities,
    feed_tasks,
    seed_tasks,
)
from fleet.dev.procs import is_chatter, prefix_line
from fleet.dev.runner import DevError, DevOptions, check_backend_url, child_env, plugin_args
from fleet.dev.summary import summary_line


def test_memory_backend_is_refused_with_a_reason() -> None:
    with pytest.raises(DevError, match="two"):
        check_backend_url("memory://x")
    check_backend_url("sqlite:///./fleet.db")
    check_backend_url("redis://127.0.0.1:6379/0")


def test_plugin_args_add_the_demo_plugins_once() -> None:
    opts = DevOptions(backend_url="sqlite:///x.db", plugins=("my_plugin", "cf_scraper"))
    assert plugin_args(opts) == ["--plugin", "my_plugin", "--plugin", "cf_scraper"]
    demo = plugin_args(DevOptions(backend_url="sqlite:///x.db", plugins=("cf_scraper",), demo=True))
    specs = demo[1::2]
    assert sorted(specs) == sorted(DEMO_PLUGINS) and demo[::2] == ["--plugin"] * len(specs)


def test_child_env_carries_backend_token_and_pythonpath(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/existing")
    env = child_env(DevOptions(backend_url="sqlite:///a.db", port=9000), "tok", ["/ex/a", "/ex/b"])
    assert env["FLEET_BACKEND_URL"] == "sqlite:///a.db"
    assert env["FLEET_ADMIN_TOKEN"] == "tok"
    assert env["FLEET_MASTER_URL"] == "http://127.0.0.1:9000"
    assert env["PYTHONPATH"].split(":") == ["/ex/a", "/ex/b", "/existing"]
    assert env["PYTHONUNBUFFERED"] == "1"


def test_demo_pythonpath_makes_every_demo_plugin_importable() -> None:
    # A fresh interpreter: this session may have imported the examples already.
    found = subprocess.check_output(
        [sys.executable, "-c", "import json; from fleet.dev.demo_seed import demo_pythonpath;"
         "print(json.dumps(demo_pythonpath()))"],
        text=True,
    )  # fmt: skip
    dirs = json.loads(found)
    # [] when the examples are pip-installed; else their source directories.
    assert all((Path(d) / "pyproject.toml").exists() for d in dirs)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(dirs)}
    subprocess.run(
        [sys.executable, "-c", "import " + ", ".join(("cf_contracts", *DEMO_PLUGINS))],
        env=env, check=True,
    )  # fmt: skip


def test_demo_seed_has_a_harvest_scrapes_broken_pages_and_stock_checks() -> None:
    seeds = seed_tasks("http://127.0.0.1:8765", random.Random(1))
    assert seeds["cf-cookie-harvester"] == [{"payload": {"site": "127.0.0.1:8765"}}]
    urls = [t["payload"]["url"] for t in seeds["cf-scraper"]]
    assert len(urls) == len(set(urls)) == 32  # pages 1..30 and the broken 13, 42, 77
    broken = [t for t in seeds["cf-scraper"] if t.get("max_attempts") == 2]
    assert sorted(int(t["payload"]["url"].rsplit("/", 1)[1]) for t in broken) == sorted(
        BROKEN_SEED_PAGES
    )
    assert len(seeds["inventory-sync"]) == 5
    feed = feed_tasks("http://127.0.0.1:8765", random.Random(2))
    assert len(feed["cf-scraper"]) == 3 and len(feed["inventory-sync"]) == 1
    configs = demo_configs("http://127.0.0.1:8765")
    assert configs["pinger"]["url"] == "http://127.0.0.1:8765/health"
    assert configs["inventory-sync"]["api_url"] == "http://127.0.0.1:8765/api"
    for leasing in ("cf-cookie-harvester", "cf-scraper"):
        assert configs[leasing]["identity_pool"] == DEMO_IDENTITY_POOL
    # One harvest per identity when the demo has its three exits.
    three = seed_tasks("http://127.0.0.1:8765", random.Random(1), harvests=3)
    assert three["cf-cookie-harvester"] == [{"payload": {"site": "127.0.0.1:8765"}}] * 3


def test_demo_identities_are_one_per_exit_with_coherent_fingerprints() -> None:
    proxies = ["http://127.0.0.1:8766", "http://127.0.0.1:8767", "http://127.0.0.1:8768"]
    parsed = [parse_identity(raw) for raw in demo_identities(proxies)["identities"]]
    assert [(i.id, i.proxy) for i in parsed] == [
        (f"demo-{n}", url) for n, url in enumerate(proxies, 1)
    ]
    fingerprints = [i.fingerprint for i in parsed]
    assert all(f is not None for f in fingerprints)
    assert len({f.user_agent for f in fingerprints if f}) == 3  # one browser per exit
    for f in fingerprints:
        assert f is not None and f.locale and f.timezone and f.viewport and f.platform
        headers = dict(f.headers)
        # The Accept-Language follows the locale; the platform names the User-Agent's system.
        assert headers["Accept-Language"].startswith(f.locale)
        system = {"Win32": "Windows", "Linux x86_64": "Linux", "MacIntel": "Mac OS X"}
        assert system[f.platform] in f.user_agent


def test_output_lines_are_prefixed_and_request_chatter_is_recognised() -> None:
    assert prefix_line("worker", "hello", colour=False) == "worker | hello"
    assert prefix_line("dev", "x", colour=False) == "dev    | x"
    assert "\x1b[" in prefix_line("master", "x", colour=True)
    assert is_chatter('12:00:00 INFO    httpx: HTTP Request: GET http://x/ "HTTP/1.1 200 OK"')
    assert is_chatter('INFO:     127.0.0.1:40034 - "GET /readyz HTTP/1.1" 200 OK')
    assert not is_chatter("INFO:     Shutting down")
    assert not is_chatter("12:00:00 ERROR   cf-scraper.slot.0: task 1 dead-lettered")


def test_summary_line_counts_queues_workers_and_pools() -> None:
    automations = [
        {
            "type": "cf-scraper",
            "workers": {"up": 1},
            "queue": {
                "pending_total": 2,
                "scheduled": 1,
                "processing": 3,
                "dead": 4,
                "counters": {"completed": 40},
            },
        },
        {"type": "quiet", "workers": {"up": 1}, "queue": {"counters": {"completed": 0}}},
        {"type": "pinger", "workers": {"up": 1}, "queue": None},
        {"type": "orphan", "workers": {"up": 0}, "queue": None},
    ]
    pools = [
        {"name": "cf-cookies", "available": 3, "total": 5},
        {"name": "empty", "available": 0, "total": 0},
    ]
    assert summary_line(automations, pools) == (
        "cf-scraper 40 done, 4 dead, 6 waiting · quiet 0 done · pinger running · "
        "orphan no worker · pool cf-cookies 3/5 free"
    )
    identities = [
        {"pool": "demo", "total": 3, "counts": {"ready": 2, "leased": 1, "cooling": 0}},
        {"pool": "gone", "total": 0, "counts": {"ready": 0}},
    ]
    assert (
        summary_line([], [], identities)
        == "identities demo 2 ready, 1 leased · identities gone none"
    )
    assert summary_line([], []) == "no automations yet"
