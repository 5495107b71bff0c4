"""Detectors of plugins: the ``fleet.block_detectors`` entry points of an installed
distribution (here a ``*.dist-info`` folder on ``sys.path``, as pip leaves it), tried
after a type's rules and before the built-in detectors; a broken one is skipped."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet.core.blocks import Classifier, classify, plugin_detectors, reset_plugins

MODULE = '''
from fleet.core.blocks import Seen, Verdict


def teapot(seen: Seen) -> Verdict | None:
    if "I am a teapot" in seen.body:
        return Verdict("blocked", "teapot-waf", "the teapot page")
    return None


class Queue:
    """A class entry point: instantiated with no arguments, the instance is the detector."""

    def __init__(self) -> None:
        self.seen = 0

    def __call__(self, seen: Seen) -> Verdict | None:
        self.seen += 1
        if seen.headers.get("x-queue-it"):
            return Verdict("throttled", "queue-it", "x-queue-it", retry_after=30.0)
        return None
'''


def install(root: Path, entries: dict[str, str]) -> str:
    """A distribution on ``root`` with a module and ``entries`` (name -> "mod:attr", the
    module written as ``{mod}``); the module's name."""
    module = f"blockplug_{uuid.uuid4().hex[:8]}"
    (root / f"{module}.py").write_text(MODULE)
    info = root / f"{module}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    lines = [f"{name} = {value.format(mod=module)}" for name, value in entries.items()]
    (info / "entry_points.txt").write_text("[fleet.block_detectors]\n" + "\n".join(lines) + "\n")
    return module


@pytest.fixture
def plugins_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.setenv("FLEET_ENTRY_POINTS", "1")  # the suite's conftest turns them off
    monkeypatch.syspath_prepend(str(tmp_path))
    reset_plugins()
    yield tmp_path
    reset_plugins()  # the next test's classifier loads without this folder


def test_a_plugin_detector_is_used_before_the_built_in_ones(plugins_on: Path) -> None:
    install(plugins_on, {"teapot": "{mod}:teapot", "queue": "{mod}:Queue"})
    teapot = "<h1>403: I am a teapot</h1>"
    verdict = classify(403, {}, teapot)
    assert (verdict.kind, verdict.vendor) == ("blocked", "teapot-waf")
    queued = classify(200, {"X-Queue-It": "1"}, "")
    assert (queued.kind, queued.vendor, queued.retry_after) == ("throttled", "queue-it", 30.0)
    assert classify(403, {}, "Forbidden").vendor == "generic"
    # loaded once per process: the same instance of the class entry point every time
    first = plugin_detectors()
    assert plugin_detectors() is first and len(first) == 2
    counted: Any = next(d for d in first if type(d).__name__ == "Queue")
    calls = counted.seen
    classify(200, {}, "")
    assert counted.seen == calls + 1


def test_a_plugin_that_fails_to_load_is_skipped_with_a_log_line(
    plugins_on: Path, caplog: pytest.LogCaptureFixture
) -> None:
    install(
        plugins_on,
        {
            "absent": "no_such_module_here:detect",
            "wrong": "{mod}:no_such_name",
            "teapot": "{mod}:teapot",
        },
    )
    with caplog.at_level(logging.WARNING, logger="fleet.blocks"):
        verdict = classify(403, {}, "I am a teapot")
    assert verdict.vendor == "teapot-waf"
    skipped = [r.getMessage() for r in caplog.records if "not loaded" in r.getMessage()]
    assert len(skipped) == 2, skipped
    assert skipped[0].startswith("block detector plugin absent = no_such_module_here:detect")
    assert "ModuleNotFoundError" in skipped[0]
    assert skipped[1].startswith("block detector plugin wrong = ")


def test_plugins_are_off_when_entry_points_are(
    plugins_on: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(plugins_on, {"teapot": "{mod}:teapot"})
    monkeypatch.setenv("FLEET_ENTRY_POINTS", "0")
    assert plugin_detectors() == ()
    assert classify(403, {}, "I am a teapot").vendor == "generic"


def test_a_classifier_may_leave_plugins_out(plugins_on: Path) -> None:
    install(plugins_on, {"teapot": "{mod}:teapot"})
    assert Classifier()(403, {}, "I am a teapot").vendor == "teapot-waf"
    assert Classifier(plugins=False)(403, {}, "I am a teapot").vendor == "generic"
