"""The scale-out blocks of docs/deployment.md and docs/redis-schema.md as written: the
namespace environment file puts a fleet's keys under its prefix, the ``redis-cli``
line finds that fleet's queues and nothing else, and the Redis Cluster URL reads as
the nodes and credentials it names. Only the Redis address is this test's own."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from fleet.backends import open_backend
from fleet.backends.redis.cluster import parse_cluster_url
from fleet.core.submission import make_push_request
from tests.docs.blocks import fenced_blocks

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENT = (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")
SCHEMA = (ROOT / "docs" / "redis-schema.md").read_text(encoding="utf-8")


def _block(page: str, lang: str, phrase: str) -> str:
    found = [b.text for b in fenced_blocks(page) if b.lang == lang and phrase in b.text]
    assert len(found) == 1, f"one {lang} block has {phrase!r}"
    return found[0]


def _assignments(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, value = line.partition("=")
            out[name.strip()] = value.strip().strip("'")
    return out


async def test_the_namespace_env_file_and_the_scan_line_run_as_written(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _assignments(_block(DEPLOYMENT, "ini", "FLEET_NAMESPACE"))
    assert env["FLEET_BACKEND_URL"].startswith("redis://")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    # The page's Redis host is a placeholder: this test's own server stands for it.
    b = await open_backend(redis_url)
    other = await open_backend(f"{redis_url}?namespace=prod")
    try:
        await b.queues.push("scrape", [make_push_request({"n": 1})])
        await other.queues.push("scrape", [make_push_request({"n": 2})])
    finally:
        await b.close()
        await other.close()
    line = _block(SCHEMA, "text", "--scan").strip()
    assert line.startswith("redis-cli ")
    port = redis_url.rsplit(":", 1)[1].split("/")[0]
    argv = ["redis-cli", "-p", port, *line.split()[1:]]
    argv = [a.strip("'") for a in argv]
    done = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, check=True)
    found = done.stdout.split()
    assert found and all(k.startswith(f"{env['FLEET_NAMESPACE']}:fleet:queue:") for k in found)
    assert "staging:fleet:queue:scrape" in found


def test_the_cluster_url_reads_as_its_nodes() -> None:
    text = _block(DEPLOYMENT, "bash", "redis+cluster://")
    url = _assignments(text)["FLEET_BACKEND_URL"]
    target = parse_cluster_url(url)
    assert [h for h, _ in target.nodes] == ["redis-a", "redis-b", "redis-c"]
    assert (target.username, target.password, target.tls) == ("fleet", "s3cret", False)
