"""No credential reaches a worker's log (issue 24, 2): a real ``fleet worker`` process
whose plugin logs its proxies, reports one bad with a reason naming every URL and
fails with an error naming them, for every credential form Fleet accepts, on SQLite
and Redis. The lines are there, masked; no secret is. Nor in what a real master then
answers a read token about that task (its dead letter, its state) and its proxies."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from fleet.backends import open_backend
from fleet.core.redact import MASK
from tests.conftest import make_backend_url
from tests.master.conftest import READ, LiveMaster, auth, settings_for
from tests.master.test_secrets import FORMS, no_secret
from tests.worker.procs import WorkerProcess
from tests.worker.support import push, wait_until

T = "proxy-secrets"


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
async def test_worker_logs_mask_every_credential_form(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = make_backend_url(kind, request, tmp_path)
    backend = await open_backend(url)
    worker = None
    master = None
    try:
        await backend.configs.set(T, {"proxy_url": ",".join(FORMS), "max_attempts": 1})
        (task_id,) = await push(backend, T, {})
        worker = WorkerProcess(url, "tests.proxies.secret_plugin", T, "w1", tmp_path)

        def logged() -> bool:
            text = worker.log() if worker is not None else ""
            return "dead-lettered" in text and "cools down" in text

        await wait_until(logged, timeout=30, interval=0.1, what="the failure and the cool-down")
        text = worker.log()
        no_secret(text)
        lines = text.splitlines()
        # Each channel logged every URL, masked (not dropped: then there is nothing to check).
        for marker in ("this slot goes through", "cools down", "dead-lettered"):
            (line,) = [x for x in lines if marker in x]
            for shown in (f"{MASK}@10.0.0.6:3128", f"{MASK}@10.0.0.3:8080", f"{MASK}@gate"):
                assert shown in line, (marker, line)
        master = LiveMaster(settings_for(url), sweeper=False)
        master.start()
        async with httpx.AsyncClient(base_url=master.url, headers=auth(READ)) as client:
            answers = [
                await client.get(f"/api/v1/automations/{T}/dead"),
                await client.get(f"/api/v1/automations/{T}/tasks/{task_id}"),
                await client.get("/api/v1/proxies"),
            ]
        for r in answers:
            assert r.status_code == 200, r.text
            assert f"{MASK}@10.0.0.6:3128" in r.text  # the error, the reason: masked
            no_secret(r.text)
    finally:
        if master is not None:
            master.stop()
        if worker is not None:
            worker.close()
        await backend.close()
