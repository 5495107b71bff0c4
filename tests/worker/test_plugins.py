"""Plugin discovery: entry points, --plugin specs, FLEET_PLUGINS, broken plugins."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleet.cli import main
from fleet.plugins import discover, load_spec
from tests.plugins_fixture.echo import EchoAutomation
from tests.plugins_fixture.loop import LoopAutomation


def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, *eps: str) -> Path:
    """A distribution ``name`` on sys.path declaring the fleet.automations entry points
    ``eps`` (``"name = target"`` lines)."""
    dist = tmp_path / f"{name}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[fleet.automations]\n" + "".join(f"{e}\n" for e in eps))
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.fixture
def installed_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A distribution on sys.path declaring three fleet.automations entry points
    (a class, a module, and a module that fails to import)."""
    return install(
        tmp_path,
        monkeypatch,
        "fixtureplug",
        "echo = tests.plugins_fixture.echo:EchoAutomation",
        "loop = tests.plugins_fixture.loop",
        "broken = tests.plugins_fixture.broken",
    )


def test_entry_points_load_classes_and_modules_and_report_broken(installed_plugins: Path) -> None:
    found = discover(use_env=False, use_entry_points=True)
    assert found.types["wt-echo"] is EchoAutomation
    assert found.types["wt-loop"] is LoopAutomation
    assert found.sources["wt-echo"] == (
        "entry point echo = tests.plugins_fixture.echo:EchoAutomation"
    )
    (error,) = [e for e in found.errors if "broken" in e.source]
    assert error.error == "RuntimeError: this plugin is broken on purpose"
    assert "Traceback" in error.traceback and "broken.py" in error.traceback


def test_fleet_entry_points_0_ignores_installed_plugins(
    installed_plugins: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_ENTRY_POINTS", "1")
    assert "wt-echo" in discover(use_env=False).types
    monkeypatch.setenv("FLEET_ENTRY_POINTS", "0")
    assert discover(use_env=False).types == {}
    only = discover(["tests.plugins_fixture.loop"], use_env=False)
    assert set(only.types) == {"wt-loop"}  # --plugin specs still load


@pytest.fixture
def named_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Entry points named like the types they provide, and a broken one."""
    return install(
        tmp_path,
        monkeypatch,
        "namedplug",
        "wt-echo = tests.plugins_fixture.echo:EchoAutomation",
        "broken = tests.plugins_fixture.broken",
        "wt-loop = tests.plugins_fixture.loop",
    )


def test_wanted_types_stop_loading_once_found(named_plugins: Path) -> None:
    """A worker of some types (``--type``) loads only what provides them: its specs
    first, then the entry points named like a missing type; the others (here a
    broken one) are never imported. A type found nowhere loads everything."""
    by_spec = discover(
        ["tests.plugins_fixture.loop"], use_env=False, use_entry_points=True, wanted=["wt-loop"]
    )
    assert set(by_spec.types) == {"wt-loop"} and by_spec.errors == []
    assert by_spec.sources["wt-loop"] == "--plugin tests.plugins_fixture.loop"

    by_name = discover(use_env=False, use_entry_points=True, wanted=["wt-echo"])
    assert set(by_name.types) == {"wt-echo"} and by_name.errors == []
    assert by_name.sources["wt-echo"].startswith("entry point wt-echo = ")

    both = discover(
        ["tests.plugins_fixture.loop"],
        use_env=False,
        use_entry_points=True,
        wanted=["wt-echo", "wt-loop"],
    )
    assert set(both.types) == {"wt-echo", "wt-loop"} and both.errors == []

    missing = discover(use_env=False, use_entry_points=True, wanted=["wt-nope"])
    assert {"wt-echo", "wt-loop"} <= set(missing.types)
    assert [e.source for e in missing.errors] == [
        "entry point broken = tests.plugins_fixture.broken"
    ]


def test_spec_forms() -> None:
    assert load_spec("tests.plugins_fixture.echo:EchoAutomation") == [EchoAutomation]
    assert EchoAutomation in load_spec("tests.plugins_fixture.echo")
    with pytest.raises(TypeError, match="not a registered automation"):
        load_spec("tests.plugins_fixture.echo:EchoTask")
    with pytest.raises(AttributeError):
        load_spec("tests.plugins_fixture.echo:Nope")


def test_env_and_specs_with_a_broken_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEET_PLUGINS", "tests.plugins_fixture.loop, tests.plugins_fixture.broken")
    found = discover(["tests.plugins_fixture.echo", "no.such.module"], use_entry_points=False)
    assert {"wt-loop", "wt-echo"} <= set(found.types)
    sources = sorted(e.source for e in found.errors)
    assert sources == ["--plugin no.such.module", "--plugin tests.plugins_fixture.broken"]


def test_fleet_plugins_json_lists_kinds_schemas_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLEET_PLUGINS", raising=False)
    args = ["plugins", "--json", "--plugin", "tests.plugins_fixture.required"]
    args += ["--plugin", "tests.plugins_fixture.broken"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1  # a plugin failed to load
    doc = json.loads(result.output)
    row = next(r for r in doc["types"] if r["type"] == "wt-required")
    assert row["kind"] == "BatchAutomation"
    assert row["task_payload"] == "KeyTask" and row["output"] == "KeyOut"
    assert row["required_config"] == ["api_key"]
    assert "broken on purpose" in doc["errors"][0]["error"]


def test_fleet_plugins_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLEET_PLUGINS", raising=False)
    # Wide enough that no cell is truncated, however many other plugins are installed
    # (e.g. the examples, after `make dev`).
    result = CliRunner().invoke(
        main, ["plugins", "--plugin", "tests.plugins_fixture.required"], env={"COLUMNS": "250"}
    )
    assert result.exit_code == 0, result.output
    assert "wt-required" in result.output and "api_key*" in result.output


def test_worker_refuses_unknown_type() -> None:
    result = CliRunner().invoke(
        main, ["worker", "--plugin", "tests.plugins_fixture.echo", "--type", "nope"]
    )
    assert result.exit_code == 2
    assert "unknown type(s) nope" in result.output
    assert sys.modules.get("tests.plugins_fixture.echo") is not None


def test_a_task_function_is_a_plugin_by_entry_point_spec_or_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.plugins_fixture import functions

    install(
        tmp_path,
        monkeypatch,
        "functionplug",
        "ft-shout = tests.plugins_fixture.functions:ft_shout",
    )
    found = discover(use_env=False, use_entry_points=True, wanted=["ft-shout"])
    assert found.types["ft-shout"] is functions.ft_shout.automation
    assert found.errors == []
    assert load_spec("tests.plugins_fixture.functions:fetch_title") == [
        functions.fetch_title.automation
    ]
    by_module = {cls.automation_type for cls in load_spec("tests.plugins_fixture.functions")}
    assert by_module == {"ft-shout", "ft-title", "ft-quiet", "ft-with-ctx", "ft-slow"}
