"""Fail fast (issue 42, 5): a worker, ``fleet run``, ``fleet master`` or ``fleet dev``
whose *named* plugin (``--plugin``, ``FLEET_PLUGINS``, the entry point named by
``--type``) fails to load exits 1 with the error, its file and line, before it opens
the backend; an installed entry point nobody named is logged and skipped.

Real ``python -m fleet`` processes, started in a temporary folder that holds the
broken modules (a spec names a module of the current directory). A process that
wrongly starts serves until the subprocess timeout, and the test fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleet.core.errors import PluginLoadError
from fleet.plugins import discover
from tests.worker.procs import ROOT

ECHO = "tests.plugins_fixture.echo"

SYNTAX_ERROR = "import fleet\n\n\ndef broken(:\n    pass\n"
NESTED_MISSING = '"""Imports a package that is not installed."""\n\nimport requestz  # a typo\n'


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The working folder of the processes: the broken modules live here."""
    (tmp_path / "badsyntax.py").write_text(SYNTAX_ERROR)
    (tmp_path / "badimport.py").write_text(NESTED_MISSING)
    return tmp_path


def install(site: Path, name: str, *eps: str) -> Path:
    """A distribution ``name`` in ``site`` declaring fleet.automations entry points."""
    dist = site / f"{name}-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[fleet.automations]\n" + "".join(f"{e}\n" for e in eps))
    return site


def env(site: Path | None = None, **extra: str) -> dict[str, str]:
    """The environment of the children: the repository importable (the fixtures), the
    entry points of ``site`` only if one is given."""
    out = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_")}
    paths = [*([str(site)] if site else []), str(ROOT), os.environ.get("PYTHONPATH", "")]
    out.update(
        PYTHONPATH=os.pathsep.join(filter(None, paths)),
        FLEET_ENTRY_POINTS="1" if site else "0",
        FLEET_HEARTBEAT_SECONDS="0.3",
    )
    out.update(extra)
    return out


def fleet(
    cwd: Path, *args: str, environ: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleet", *args],
        cwd=cwd,
        env=environ or env(),
        capture_output=True,
        text=True,
        timeout=40,
    )


def refused(result: subprocess.CompletedProcess[str], db: Path | None = None) -> str:
    """The refusal's stderr, once the process is known to have refused cleanly: exit 1,
    no traceback, nothing on stdout, and (for a worker) no backend opened."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stdout == ""
    if db is not None:
        assert not db.exists(), "the worker opened its backend"
    return result.stderr


def test_a_syntax_error_names_file_line_and_text(folder: Path) -> None:
    db = folder / "fleet.db"
    r = fleet(
        folder, "worker", "--plugin", ECHO, "--plugin", "badsyntax", "--backend", f"sqlite:///{db}"
    )
    err = refused(r, db)
    assert "--plugin badsyntax failed: SyntaxError" in err
    assert f"at {folder / 'badsyntax.py'}, line 4: def broken(:" in err
    assert "Not starting" in err and "--log-level DEBUG" in err


def test_a_misspelled_module_is_refused(folder: Path) -> None:
    db = folder / "fleet.db"
    r = fleet(
        folder, "worker", "--plugin", "tests.plugins_fixture.ecko", "--backend", f"sqlite:///{db}"
    )
    err = refused(r, db)
    assert "--plugin tests.plugins_fixture.ecko failed: ModuleNotFoundError: " in err
    assert "No module named 'tests.plugins_fixture.ecko'" in err


def test_a_missing_import_inside_a_fleet_plugins_module_names_its_line(folder: Path) -> None:
    db = folder / "fleet.db"
    environ = env(FLEET_PLUGINS=f"{ECHO},badimport")
    r = fleet(
        folder, "worker", "--type", "wt-echo", "--backend", f"sqlite:///{db}", environ=environ
    )
    err = refused(r, db)
    assert "--plugin badimport failed: ModuleNotFoundError: No module named 'requestz'" in err
    assert f"at {folder / 'badimport.py'}, line 3: import requestz  # a typo" in err


def test_the_traceback_is_there_at_debug_level(folder: Path) -> None:
    r = fleet(
        folder, "--log-level", "DEBUG", "worker", "--plugin", "badimport", "--backend", "memory://"
    )
    assert r.returncode == 1
    assert "Traceback (most recent call last)" in r.stderr
    assert "--plugin badimport failed: ModuleNotFoundError" in r.stderr


def test_the_entry_point_named_by_type_that_fails(folder: Path) -> None:
    site = install(folder / "site", "brokenplug", "wt-x = pkgmissing.mod", "wt-y = pkgalso.missing")
    db = folder / "fleet.db"
    r = fleet(folder, "worker", "--type", "wt-x", "--backend", f"sqlite:///{db}", environ=env(site))
    err = refused(r, db)
    assert (
        "type wt-x: entry point wt-x = pkgmissing.mod failed: "
        "ModuleNotFoundError: No module named 'pkgmissing'"
    ) in err
    # Named by --type, it failed: the other entry points are not even tried.
    assert "pkgalso" not in err


def test_a_type_nobody_provides_names_the_plugins_that_failed(folder: Path) -> None:
    site = install(folder / "site", "brokenplug", "other = pkgmissing.mod")
    db = folder / "fleet.db"
    args = ("worker", "--plugin", ECHO, "--type", "wt-nope", "--backend", f"sqlite:///{db}")
    err = refused(fleet(folder, *args, environ=env(site)), db)
    assert "type(s) wt-nope not provided by any plugin that loaded" in err
    assert "entry point other = pkgmissing.mod failed: ModuleNotFoundError" in err
    assert "wt-echo" in err  # the available types
    # Nothing failed: the types there are.
    r = fleet(folder, *args)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "unknown type(s) wt-nope; available: wt-echo" in r.stderr


def test_an_unnamed_broken_entry_point_is_logged_and_skipped(folder: Path) -> None:
    """A worker without --type runs what loaded: another package's broken entry point
    is one warning line, no traceback (and the worker does start: the check that the
    refusals above are refusals, not a worker that cannot start at all)."""
    site = install(folder / "site", "brokenplug", "other = pkgmissing.mod")
    db = folder / "fleet.db"
    log = folder / "worker.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fleet", "worker", "--plugin", ECHO, "--backend", f"sqlite:///{db}"],
            cwd=folder, env=env(site), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while "wt-echo (from --plugin" not in log.read_text() and proc.poll() is None:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        finally:
            proc.terminate()
            proc.wait(20)
    text = log.read_text()
    # After `make dev` the examples' types are in the line too, perhaps before it.
    assert " runs " in text and "wt-echo (from --plugin tests.plugins_fixture.echo)" in text, text
    assert "plugin skipped: entry point other = pkgmissing.mod failed: ModuleNotFoundError" in text
    assert "Traceback" not in text and db.exists()


def test_fleet_run_refuses_a_broken_plugin(folder: Path) -> None:
    r = fleet(
        folder, "run", "wt-echo", "--plugin", ECHO, "--plugin", "badsyntax", "--payload", '{"n": 1}'
    )
    err = refused(r)
    assert "--plugin badsyntax failed: SyntaxError" in err and "line 4: def broken(:" in err


def test_fleet_master_refuses_a_broken_named_plugin(folder: Path) -> None:
    db = folder / "fleet.db"
    r = fleet(
        folder, "master", "--plugin", "badimport", "--backend", f"sqlite:///{db}", "--port", "1"
    )
    err = refused(r, db)
    assert "--plugin badimport failed: ModuleNotFoundError: No module named 'requestz'" in err
    assert "fleet master on" not in err


def test_fleet_dev_refuses_a_broken_named_plugin(folder: Path) -> None:
    db = folder / "fleet.db"
    r = fleet(folder, "dev", "--plugin", "badsyntax", "--backend", f"sqlite:///{db}", "--port", "1")
    err = refused(r, db)
    assert "--plugin badsyntax failed: SyntaxError" in err and "master |" not in err


def test_discover_strict_tries_every_spec_then_raises(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process: every named spec is tried, so the error reports them all; without
    ``strict`` they are recorded, named, and the others still load."""
    monkeypatch.chdir(folder)
    monkeypatch.delenv("FLEET_PLUGINS", raising=False)
    for name in ("badsyntax", "badimport"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    specs = ["badsyntax", ECHO, "badimport"]
    with pytest.raises(PluginLoadError) as raised:
        discover(specs, use_entry_points=False, strict=True)
    message = str(raised.value)
    assert "--plugin badsyntax failed" in message and "--plugin badimport failed" in message
    found = discover(specs, use_entry_points=False)
    assert "wt-echo" in found.types
    assert [(e.source, e.named) for e in found.errors] == [
        ("--plugin badsyntax", True),
        ("--plugin badimport", True),
    ]
    assert found.errors[1].location.endswith("badimport.py, line 3: import requestz  # a typo")
