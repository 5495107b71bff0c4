"""``import fleet.core`` stays light: no web server, no browser stack."""

from __future__ import annotations

import subprocess
import sys


def test_core_import_pulls_no_heavy_modules() -> None:
    code = (
        "import sys, fleet.core, fleet.core.browser, fleet.backends\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('fastapi', 'uvicorn', 'starlette', 'playwright', 'prometheus_client')]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def _modules_after(code: str) -> set[str]:
    run = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(','.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(run.stdout.strip().splitlines()[-1].split(","))


def test_the_cli_and_its_help_import_no_command() -> None:
    """``fleet --help`` lists every command without importing one of them, nor the
    automation bases or pydantic (``fleet.core`` loads its names on first use)."""
    loaded = _modules_after(
        "from fleet.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    )
    heavy = {"pydantic", "httpx", "fastapi", "redis", "fleet.core.automation"}
    assert not loaded & heavy, loaded & heavy
    assert not {m for m in loaded if m.startswith("fleet.cli.")}
    # a plugin's import still gets the whole public surface
    assert "fleet.core.automation" in _modules_after("from fleet.core import BatchAutomation")


def test_help_lists_each_command_as_its_own_help_says() -> None:
    import importlib

    import click
    from click.testing import CliRunner

    from fleet.cli import COMMANDS, SUMMARIES, main

    shown = CliRunner().invoke(main, ["--help"], terminal_width=200).output
    assert set(SUMMARIES) == set(COMMANDS)
    for name, target in COMMANDS.items():
        module, attr = target.split(":")
        cmd: click.Command = getattr(importlib.import_module(module), attr)
        own = click.Command(name, help=cmd.help).get_short_help_str(120)
        assert click.Command(name, help=SUMMARIES[name]).get_short_help_str(120) == own, name
        assert f"{name} " in shown and own[:40] in shown, name
