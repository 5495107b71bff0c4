"""The documented nginx sample (docs/deploy/nginx-fleet.conf) in front of a real
master: TLS, the API, a batch body, and the event stream arriving unbuffered."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.master_proc import MASTER_TOKEN
from tests.support.redis_server import free_port, require_redis
from tests.support.waits import until_sync
from tests.worker.procs import ROOT, fleet_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

SAMPLE = ROOT / "docs" / "deploy" / "nginx-fleet.conf"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)


def render(tmp: Path, master_port: int, port: int) -> Path:
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-keyout", str(tmp / "key.pem"), "-out", str(tmp / "cert.pem")],
        check=True, capture_output=True,
    )  # fmt: skip
    site = SAMPLE.read_text()
    site = site.replace("127.0.0.1:8000", f"127.0.0.1:{master_port}")
    site = site.replace("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;")
    site = site.replace("/etc/ssl/fleet/fullchain.pem", str(tmp / "cert.pem"))
    site = site.replace("/etc/ssl/fleet/privkey.pem", str(tmp / "key.pem"))
    conf = tmp / "nginx.conf"
    conf.write_text(
        f"daemon off;\npid {tmp}/nginx.pid;\nerror_log {tmp}/error.log;\n"
        "events {}\n"
        f"http {{\naccess_log off;\nclient_body_temp_path {tmp}/body;\n"
        f"proxy_temp_path {tmp}/proxy;\nfastcgi_temp_path {tmp}/f;\nuwsgi_temp_path {tmp}/u;\n"
        f"scgi_temp_path {tmp}/s;\n{site}\n}}\n"
    )
    return conf


def wait_up(url: str, **kw: object) -> None:
    def up() -> bool:
        return httpx.get(url, timeout=1, **kw).status_code == 200  # type: ignore[arg-type]

    until_sync(up, timeout=30, interval=0.1, what=f"{url} to come up", ignoring=(httpx.HTTPError,))


def test_the_nginx_sample_serves_the_master(tmp_path: Path) -> None:
    if NGINX is None:
        if require_redis():  # strict (CI) mode: .ci/run installs nginx
            pytest.fail("nginx is required but not installed")
        pytest.skip("nginx not installed (apt-get install nginx)")
    master_port, port = free_port(), free_port()
    env = fleet_env(FLEET_ADMIN_TOKEN=MASTER_TOKEN)
    args = [sys.executable, "-m", "fleet", "--log-level", "WARNING", "master"]
    args += ["--port", str(master_port), "--backend", f"sqlite:///{tmp_path / 'f.db'}"]
    log = (tmp_path / "master.log").open("wb")
    master = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    nginx = subprocess.Popen([NGINX, "-c", str(render(tmp_path, master_port, port))])
    try:
        wait_up(f"http://127.0.0.1:{master_port}/healthz")
        base = f"https://127.0.0.1:{port}"
        wait_up(f"{base}/healthz", verify=False)
        with httpx.Client(base_url=base, verify=False, timeout=10,
                          headers={"Authorization": f"Bearer {MASTER_TOKEN}"}) as c:  # fmt: skip
            r = c.get("/healthz")
            assert r.status_code == 200
            assert "nginx/" not in r.headers.get("server", "")  # server_tokens off
            assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
            assert c.get("/api/v1/automations").status_code == 200
            assert c.get("/api/v1/automations", headers={"Authorization": ""}).status_code == 401
            t0 = time.monotonic()
            with c.stream("GET", "/api/v1/events") as stream:
                assert stream.status_code == 200
                first = next(stream.iter_lines())
            assert first.startswith(("event:", "data:", ":", "retry:", "id:")), first
            assert time.monotonic() - t0 < 5  # not held back by a buffer
    finally:
        nginx.terminate()
        master.terminate()
        nginx.wait(10)
        master.wait(10)
        log.close()
