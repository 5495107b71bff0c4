"""Every example is a pip-installable package whose entry points Fleet discovers.

A fresh venv (Fleet and its dependencies only, linked from this one's site-packages so
nothing is downloaded, and blind to the plugins installed here: tests/support/venvs.py)
gets every example with ``pip install -e``; then the example tests run again inside
it, importing the installed packages.
"""

from __future__ import annotations

import email.parser
import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.examples.conftest import EXAMPLE_DIRS, INSTALLED
from tests.support.venvs import DIST_NAME, entry_point_types, make_venv, pip_install

pytestmark = pytest.mark.skipif(INSTALLED, reason="already running inside the install test")

REPO = Path(__file__).resolve().parents[2]
TYPES = {"cf-cookie-harvester", "cf-scraper", "inventory-sync", "pinger"}
#: Each example's own tests, rerun against the installed packages.
INNER_TESTS = [f"tests/examples/test_{name}.py" for name in ("cf_examples", "pinger", "inventory")]


@pytest.mark.slow
@pytest.mark.timeout(300)  # a pip install and a nested pytest run
def test_examples_install_with_pip_and_pass_their_tests(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    assert entry_point_types(python) == set()  # nothing installed beside Fleet leaks in
    pip_install(python, *[arg for d in EXAMPLE_DIRS for arg in ("-e", str(d))])
    assert entry_point_types(python) == TYPES
    with_entry_points = {**os.environ, "FLEET_ENTRY_POINTS": "1"}
    listed = json.loads(
        subprocess.check_output(
            [python, "-m", "fleet", "plugins", "--json"], cwd=REPO, env=with_entry_points, text=True
        )
    )
    assert listed["errors"] == []
    assert {t["type"]: t["source"].startswith("entry point") for t in listed["types"]} == {
        t: True for t in TYPES
    }

    env = {**os.environ, "FLEET_EXAMPLES_INSTALLED": "1"}
    run = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *INNER_TESTS],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert " passed" in run.stdout and " failed" not in run.stdout


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_wheel_is_named_fleet_automation_and_every_example_depends_on_it(
    tmp_path: Path,
) -> None:
    # `fleet` on PyPI is another project: a plugin depending on it would install that.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "--no-input", "--disable-pip-version-check", "-w", str(tmp_path), str(REPO)],
        check=True, timeout=100,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name.startswith(f"{DIST_NAME.replace('-', '_')}-")
    with zipfile.ZipFile(wheel) as zf:
        meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(zf.read(meta_name).decode())
        names = zf.namelist()
        entry_points = zf.read(meta_name.replace("METADATA", "entry_points.txt")).decode()
    assert metadata["Name"] == DIST_NAME
    assert any(n.startswith("fleet/core/") for n in names)  # the import package stays `fleet`
    assert "fleet = fleet.cli:run" in entry_points
    extras = metadata.get_all("Provides-Extra") or []
    assert {"master", "browser"} <= set(extras)
    for d in EXAMPLE_DIRS:
        project = tomllib.loads((d / "pyproject.toml").read_text())["project"]
        deps = [Requirement(r) for r in project["dependencies"]]
        assert DIST_NAME in {r.name for r in deps}, d.name
        assert "fleet" not in {r.name for r in deps}, d.name
