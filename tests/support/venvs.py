"""A fresh virtualenv beside Fleet, isolated from whatever else is installed here.

``make_venv`` builds a venv without system site-packages and without pip (the
outer pip installs into it with ``--python``). It sees Fleet's dependencies
through a folder of symlinks to exactly the distributions Fleet needs (with the
extras asked for), taken from this interpreter's site-packages, so nothing is
downloaded; a plugin installed in ``.venv`` beside Fleet (the examples, the
README's own) is not among them. Fleet itself is installed from the checkout
(``--no-deps``), so the venv has its own ``fleet`` command.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
DIST_NAME = "fleet-automation"


def dependency_closure(root: str) -> set[str]:
    """Canonical names of the distributions ``root`` (a requirement, extras allowed)
    needs here, itself included; markers are evaluated for this interpreter."""
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    todo = [Requirement(root)]
    while todo:
        req = todo.pop()
        key = (canonicalize_name(req.name), frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = distribution(req.name)
        except PackageNotFoundError:
            continue  # an optional dependency not installed here (a marker for another OS)
        names.add(key[0])
        for text in dist.requires or []:
            dep = Requirement(text)
            wanted = ["", *sorted(req.extras)]
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in wanted):
                todo.append(dep)
    return names


def linked_site(dest: Path, names: set[str]) -> Path:
    """A folder of symlinks to the files of the distributions ``names``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in sorted(names):
        dist = distribution(name)
        base = Path(str(dist.locate_file("")))
        for file in dist.files or []:
            top = file.parts[0]
            if top in ("..", "__pycache__") or (dest / top).exists():
                continue
            if (base / top).exists():
                os.symlink(base / top, dest / top)
    return dest


def make_venv(path: Path, extras: str = "test") -> Path:
    """A venv at ``path`` with Fleet (from the checkout) and its dependencies
    (with ``extras``) only; returns its python."""
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(path)
    python = path / "bin" / "python"
    site = subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
    ).strip()
    names = dependency_closure(f"{DIST_NAME}[{extras}]") - {DIST_NAME}
    shared = linked_site(path / "fleet-deps", names)
    Path(site, "fleet-deps.pth").write_text(f"import site; site.addsitedir({str(shared)!r})\n")
    # not editable: an editable build of Fleet needs `editables`, which .venv may lack
    pip_install(python, "--no-deps", str(REPO))
    return python


def pip_install(python: Path, *args: str, cwd: Path | None = None) -> None:
    """``pip install`` into the venv of ``python``, offline-safe: the build backend
    (hatchling) comes from the venv's own dependencies, not from an index."""
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
         "--no-build-isolation", "--no-input", "--disable-pip-version-check", *args],
        check=True, timeout=120, cwd=cwd,
    )  # fmt: skip


def entry_point_types(python: Path) -> set[str]:
    """The ``fleet.automations`` entry points the venv of ``python`` sees."""
    out = subprocess.check_output(
        [python, "-c",
         "from importlib.metadata import entry_points as e;"
         "print('\\n'.join(p.name for p in e(group='fleet.automations')))"],
        text=True,
    )  # fmt: skip
    return set(out.split())
