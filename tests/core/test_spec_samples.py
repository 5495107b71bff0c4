"""Every code sample of the spec pages imports, registers and type-checks as written."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.core import BatchAutomation, ContinuousAutomation
from fleet.core.automation import get_automation

SAMPLES = Path(__file__).parent / "spec_samples"
MODULES = ["automations_page", "batch_page", "contracts_page", "primitives_page"]


@pytest.mark.parametrize("name", MODULES)
def test_sample_imports(name: str) -> None:
    importlib.import_module(f"tests.core.spec_samples.{name}")


def test_samples_register_their_types() -> None:
    importlib.import_module("tests.core.spec_samples.automations_page")
    importlib.import_module("tests.core.spec_samples.batch_page")
    solver = get_automation("captcha-solver")
    assert solver is not None and issubclass(solver, ContinuousAutomation)
    scraper = get_automation("scraper")
    assert scraper is not None and issubclass(scraper, BatchAutomation)
    assert scraper.automation_type == "scraper"


def test_samples_type_check() -> None:
    root = Path(__file__).parents[2]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-incremental",
            "--config-file",
            str(SAMPLES / "mypy.ini"),
            "--no-error-summary",
            str(SAMPLES),
        ],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert out.returncode == 0, out.stdout + out.stderr
