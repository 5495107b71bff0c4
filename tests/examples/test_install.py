"""Every example is a pip-installable package whose entry points Fleet discovers.

A fresh venv (sharing this one's site-packages for Fleet and its dependencies, so
nothing is downloaded) gets every example with ``pip install -e``; then the example
tests run again inside it, importing the installed packages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.examples.conftest import EXAMPLE_DIRS, INSTALLED

pytestmark = pytest.mark.skipif(INSTALLED, reason="already running inside the install test")

REPO = Path(__file__).resolve().parents[2]
TYPES = {"cf-cookie-harvester", "cf-scraper", "inventory-sync", "pinger"}
#: Each example's own tests, rerun against the installed packages.
INNER_TESTS = [f"tests/examples/test_{name}.py" for name in ("cf_examples", "pinger", "inventory")]


def make_venv(path: Path) -> Path:
    """A venv without pip whose site-packages also sees this interpreter's."""
    venv.EnvBuilder(with_pip=False).create(path)
    python = path / "bin" / "python"
    site = subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
    ).strip()
    parent = next(p for p in sys.path if p.endswith("site-packages") and "python3" in p)
    Path(site, "parent.pth").write_text(f"import site; site.addsitedir({parent!r})\n")
    return python


@pytest.mark.slow
@pytest.mark.timeout(300)  # a pip install and a nested pytest run
def test_examples_install_with_pip_and_pass_their_tests(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    editables = [arg for d in EXAMPLE_DIRS for arg in ("-e", str(d))]
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
         "--no-build-isolation", "--no-input", "--disable-pip-version-check", *editables],
        check=True, timeout=120,
    )  # fmt: skip
    found = subprocess.check_output(
        [python, "-c",
         "import json; from importlib.metadata import entry_points as e;"
         "print(json.dumps({p.name: p.value for p in e(group='fleet.automations')}))"],
        text=True,
    )  # fmt: skip
    assert set(json.loads(found)) == TYPES
    listed = json.loads(
        subprocess.check_output([python, "-m", "fleet", "plugins", "--json"], cwd=REPO, text=True)
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
