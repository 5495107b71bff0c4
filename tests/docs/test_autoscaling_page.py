"""docs/autoscaling.md as written: its config block validates as a Config; its
Kubernetes manifests validate against their published schemas; the metrics its
queries name are on a live master's ``/metrics``; its systemd units pass
``systemd-analyze verify``; its scale script, run with ``sh`` against a live master
(SQLite), starts the units ``desired_workers`` asks for.

Schemas: the Deployment and the HPA against Kubernetes' own (the
``kubernetes-validate`` package, strict: an unknown field fails); the ScaledObject
against the ``openAPIV3Schema`` of KEDA's published CRD (``schemas/``, kept from
kedacore/keda; no installable package ships it without side effects), made strict
the same way. The prometheus trigger's metadata, which the CRD leaves as a string
map, is checked against KEDA's prometheus scaler page (``serverAddress``, ``query``
and ``threshold`` required; ``activationThreshold`` among the optional ones).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import kubernetes_validate  # type: ignore[import-untyped]  # no stubs
import pytest
import yaml  # type: ignore[import-untyped]  # types-PyYAML is not a test dependency
from pydantic import BaseModel

from fleet.backends import open_backend
from fleet.core import BatchAutomation, Context, Task
from fleet.core.catalog import catalog_entry
from fleet.core.config import BaseConfig
from fleet.worker.configstate import check_config
from tests.cli.test_task_command import db_url, live  # noqa: F401  (fixtures)
from tests.docs.blocks import Block, fenced_blocks
from tests.master.conftest import ADMIN, LiveMaster
from tests.worker.support import push

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "autoscaling.md").read_text(encoding="utf-8")
BLOCKS = fenced_blocks(PAGE)
K8S_VERSION = "1.30"
#: KEDA's prometheus scaler page: the trigger's metadata keys.
PROMETHEUS_REQUIRED = {"serverAddress", "query", "threshold"}
PROMETHEUS_OPTIONAL = {
    "activationThreshold",
    "namespace",
    "customHeaders",
    "ignoreNullValues",
    "queryParameters",
    "unsafeSsl",
}


#: keda.sh/v1alpha1 ScaledObject: the openAPIV3Schema of KEDA's published CRD.
CRD = yaml.safe_load((Path(__file__).parent / "schemas" / "keda.sh_scaledobjects.yaml").read_text())
(SERVED,) = [v for v in CRD["spec"]["versions"] if v["name"] == "v1alpha1"]
SCALED_OBJECT: dict[str, Any] = SERVED["schema"]["openAPIV3Schema"]


class ScrapeTask(BaseModel):
    url: str


class ScaledType(BatchAutomation[BaseConfig]):
    """The page's queued type, catalogued directly: never registered, so this module
    takes no type name from the samples that register their own ``scraper``."""

    automation_type = "scraper"
    TaskPayload = ScrapeTask

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        del task, ctx


def saved(name: str) -> Block:
    (block,) = [b for b in BLOCKS if b.file_name == name]
    return block


def strict(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` on every object that lists its
    properties and says nothing of others."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def test_the_config_block_is_a_valid_auto_config() -> None:
    (block,) = [b for b in BLOCKS if b.lang == "json"]
    checked = check_config(BaseConfig, json.loads(block.text))
    assert checked.config is not None, checked.error
    assert checked.config.auto and checked.config.max_slots == 64


@pytest.mark.parametrize("name", ["worker.yaml", "hpa.yaml"])
def test_kubernetes_manifests_validate(name: str) -> None:
    doc = yaml.safe_load(saved(name).text)
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    broken = json.loads(json.dumps(doc))
    broken["spec"]["replicaz"] = 1  # the test can fail: a typo is refused
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_the_scaled_object_validates_against_kedas_schema() -> None:
    doc = yaml.safe_load(saved("scaledobject.yaml").text)
    schema = strict(SCALED_OBJECT)
    jsonschema.validate(doc, schema)
    (trigger,) = doc["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    keys = set(trigger["metadata"])
    assert PROMETHEUS_REQUIRED <= keys <= PROMETHEUS_REQUIRED | PROMETHEUS_OPTIONAL
    float(trigger["metadata"]["threshold"])
    assert (
        doc["spec"]["scaleTargetRef"]["name"]
        == yaml.safe_load(saved("worker.yaml").text)["metadata"]["name"]
    )
    broken = json.loads(json.dumps(doc))
    broken["spec"]["minReplicas"] = 0  # the HPA's spelling: not KEDA's
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def _units(tmp_path: Path) -> list[Path]:
    """The page's units, with their executables pointed at files that exist here."""
    script = tmp_path / "fleet-scale"
    script.write_text(saved("/usr/local/bin/fleet-scale").text)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    fleet = shutil.which("fleet", path=str(ROOT / ".venv" / "bin")) or "/bin/true"
    out = []
    for name in (
        "/etc/systemd/system/fleet-worker@.service",
        "/etc/systemd/system/fleet-scale.service",
        "/etc/systemd/system/fleet-scale.timer",
    ):
        text = saved(name).text.replace("/opt/fleet/bin/fleet", fleet)
        text = text.replace("/usr/local/bin/fleet-scale", str(script))
        # An instance of the template is what systemd runs.
        path = tmp_path / Path(name).name.replace("@.", "@1.")
        path.write_text(text)
        out.append(path)
    return out


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_the_systemd_units_verify(tmp_path: Path) -> None:
    units = _units(tmp_path)
    r = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *map(str, units)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Unknown keys are warnings on stderr with status 0: both must be clean.
    assert (r.returncode, r.stderr.strip()) == (0, ""), r.stderr


def _run_scale(live: LiveMaster, tmp_path: Path) -> tuple[str, list[str]]:  # noqa: F811
    calls = tmp_path / "systemctl.calls"
    stub = tmp_path / "bin" / "systemctl"  # the one outside tool the script drives
    stub.parent.mkdir(exist_ok=True)
    stub.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    stub.chmod(0o755)
    script = tmp_path / "fleet-scale"
    script.write_text(saved("/usr/local/bin/fleet-scale").text)
    env = {
        **os.environ,
        "PATH": f"{stub.parent}{os.pathsep}{os.environ['PATH']}",
        "MASTER_URL": live.url,
        "MASTER_TOKEN": ADMIN,
        "WORKER_TYPE": "scraper",
    }
    r = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    started = calls.read_text().splitlines() if calls.exists() else []
    calls.unlink(missing_ok=True)
    return r.stdout.strip(), started


@pytest.mark.skipif(shutil.which("jq") is None, reason="no jq")
def test_the_scale_script_and_the_queries(
    live: LiveMaster,  # noqa: F811
    db_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    async def catalogued(n: int) -> None:
        async with await open_backend(db_url) as b:
            await b.catalog.put("scraper", catalog_entry(ScaledType))
            if n:
                await push(b, "scraper", *[{"url": f"http://x/{i}"} for i in range(n)])

    asyncio.run(catalogued(0))
    out, started = _run_scale(live, tmp_path)
    assert (out, started) == ("fleet-scale: scraper wants 0 worker(s)", [])
    asyncio.run(catalogued(5))
    out, started = _run_scale(live, tmp_path)
    # Work and no worker measured yet: one to start with.
    assert (out, started) == (
        "fleet-scale: scraper wants 1 worker(s)",
        ["start fleet-worker@1.service"],
    )

    metrics = httpx.get(f"{live.url}/metrics", headers={"Authorization": f"Bearer {ADMIN}"}).text
    assert 'fleet_desired_workers{type="scraper"} 1.0' in metrics
    query = yaml.safe_load(saved("scaledobject.yaml").text)["spec"]["triggers"][0]["metadata"]
    hpa = yaml.safe_load(saved("hpa.yaml").text)["spec"]["metrics"][0]["external"]["metric"]
    names = {*re.findall(r"fleet_[a-z_]+", query["query"]), hpa["name"]}
    for name in names:
        assert f'{name}{{type="scraper"}}' in metrics, name
    assert hpa["selector"]["matchLabels"] == {"type": "scraper"}
