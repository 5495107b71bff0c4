"""Plugin discovery: entry points of group ``fleet.automations`` and explicit
``--plugin MODULE[:ATTR]`` specs (also ``FLEET_PLUGINS``, comma separated).

A plugin that fails to import is recorded with its traceback and skipped, so one
broken package never keeps the others from running. A *named* plugin (a spec, or the
entry point named like a type the caller asked for) is different: the caller said it
needs it, and ``discover(strict=True)`` raises :class:`~fleet.core.errors.PluginLoadError`
for it before importing anything else (``fleet worker`` and ``fleet run`` refuse to start).

A spec may name a module in the current directory, from the ``fleet`` console
script as from ``python -m fleet``: see :func:`cwd_on_path` for where that
directory goes on ``sys.path``.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import traceback
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any

from fleet.core.automation import Automation, registered
from fleet.core.errors import PluginLoadError
from fleet.core.functions import FunctionTask

log = logging.getLogger(__name__)

#: Entry-point group of automation plugins.
GROUP = "fleet.automations"
#: Environment variable naming extra plugin specs, comma separated.
ENV_PLUGINS = "FLEET_PLUGINS"
#: ``FLEET_ENTRY_POINTS=0`` ignores installed packages' entry points: only ``--plugin``
#: and ``FLEET_PLUGINS`` specs load (a host with many plugins, one process for one of them;
#: the test suite, whatever happens to be installed in its venv).
ENV_ENTRY_POINTS = "FLEET_ENTRY_POINTS"


def entry_points_enabled(environ: dict[str, str] | None = None) -> bool:
    """Whether discovery loads the ``fleet.automations`` entry points (``FLEET_ENTRY_POINTS``)."""
    raw = (os.environ if environ is None else environ).get(ENV_ENTRY_POINTS, "1")
    return raw.strip().lower() not in ("0", "false", "no", "off")


@dataclass(frozen=True, slots=True)
class PluginError:
    """A plugin that could not be loaded.

    Attributes:
        source: ``entry point <name> = <value>`` or ``--plugin <spec>``.
        error: The exception, one line.
        traceback: The full traceback text.
        location: Where in the plugin's own code it failed: ``<file>, line <n>: <text>``
            (for a syntax error, the offending line), or ``""`` when no frame of the
            plugin is involved (a module that is not there at all).
        named: The caller asked for this plugin by name: a ``--plugin`` or
            ``FLEET_PLUGINS`` spec, or the entry point named like a wanted type.
        provides: The wanted type an entry point is named like (``--type NAME``), or
            ``""``.
    """

    source: str
    error: str
    traceback: str
    location: str = ""
    named: bool = False
    provides: str = ""

    def to_dict(self) -> dict[str, str]:
        """The error as JSON (``fleet plugins --json``)."""
        return {
            "source": self.source,
            "error": self.error,
            "location": self.location,
            "traceback": self.traceback,
        }

    def describe(self) -> str:
        """One message for people: what failed, why, and where (no traceback)."""
        where = f"\n  at {self.location}" if self.location else ""
        wanted = f"type {self.provides}: " if self.provides else ""
        return f"{wanted}{self.source} failed: {self.error}{where}"


@dataclass(slots=True)
class Plugins:
    """What discovery found.

    Attributes:
        types: Automation classes by type name.
        sources: Where each type came from (entry point or spec).
        origins: The package each type came from, ``name version`` (or ``--plugin spec``).
        errors: Plugins that failed to load.
    """

    types: dict[str, type[Automation[Any]]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    errors: list[PluginError] = field(default_factory=list)

    def raise_for_named(self) -> None:
        """Raise if a plugin the caller named failed to load.

        Raises:
            PluginLoadError: One or more named plugins failed; the message describes
                each (:meth:`PluginError.describe`).
        """
        named = [e for e in self.errors if e.named]
        if named:
            raise PluginLoadError("\n".join(e.describe() for e in named))


def _automations_in(obj: Any, before: set[str]) -> list[type[Automation[Any]]]:
    """The automation classes an entry point or spec target stands for (a class, a
    ``@task`` function, or a module: every automation it registered or holds)."""
    if isinstance(obj, FunctionTask):
        obj = obj.automation
    if isinstance(obj, type):
        name = getattr(obj, "automation_type", "")
        if issubclass(obj, Automation) and name and registered().get(name) is obj:
            return [obj]
        raise TypeError(
            f"{obj.__module__}.{obj.__qualname__} is not a registered automation "
            "(decorate it with @register(...))"
        )
    if isinstance(obj, ModuleType):
        found: dict[str, type[Automation[Any]]] = {}
        for name, cls in registered().items():
            if name not in before or cls.__module__ == obj.__name__:
                found[name] = cls
        for value in vars(obj).values():
            if isinstance(value, FunctionTask):
                value = value.automation
            if isinstance(value, type) and issubclass(value, Automation):
                name = getattr(value, "automation_type", "")
                if name and registered().get(name) is value:
                    found[name] = value
        return list(found.values())
    raise TypeError(f"{obj!r} is neither an automation class, a @task function nor a module")


def cwd_on_path() -> None:
    """Make modules of the current directory importable by plugin specs.

    ``python -m fleet`` starts with the current directory first on ``sys.path``;
    the ``fleet`` console script does not (its ``sys.path[0]`` is the script's own
    directory), so ``fleet run --plugin my_module`` could not find ``my_module.py``.
    The directory is *appended*, not prepended: the standard library and installed
    packages keep precedence, so a stray ``json.py`` or ``redis.py`` next to where
    a worker is started never shadows them for the whole process. The price is
    that a local module named like an installed one is not the one imported
    (rename it, or run ``python -m fleet``). Nothing is added if the directory
    (or ``""``, which stands for it) is already on the path.
    """
    try:
        cwd = os.getcwd()
    except OSError:  # the directory was removed under us: nothing to add
        return
    if "" in sys.path or cwd in sys.path:
        return
    sys.path.append(cwd)


def load_spec(spec: str) -> list[type[Automation[Any]]]:
    """Import ``MODULE`` or ``MODULE:ATTR`` and return the automations it provides.

    The current directory is put on ``sys.path`` first (:func:`cwd_on_path`).

    Raises:
        ImportError: The module cannot be imported.
        AttributeError: ``ATTR`` does not exist.
        TypeError: The target is not a registered automation or a module.
    """
    cwd_on_path()
    module_name, _, attr = spec.strip().partition(":")
    before = set(registered())
    module = importlib.import_module(module_name)
    target: Any = module
    for part in filter(None, attr.split(".")):
        target = getattr(target, part)
    return _automations_in(target, before)


def _load_entry_point(ep: EntryPoint) -> list[type[Automation[Any]]]:
    before = set(registered())
    return _automations_in(ep.load(), before)


def _add(
    found: Plugins, classes: Iterable[type[Automation[Any]]], source: str, origin: str
) -> None:
    for cls in classes:
        found.types[cls.automation_type] = cls
        found.sources.setdefault(cls.automation_type, source)
        found.origins.setdefault(cls.automation_type, origin)


def _origin(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)  # set for entry points read from an installed package
    if dist is None:
        return ep.value
    return f"{dist.metadata['Name']} {dist.version}"


def env_specs(environ: dict[str, str] | None = None) -> list[str]:
    """The plugin specs listed in ``FLEET_PLUGINS``."""
    raw = (os.environ if environ is None else environ).get(ENV_PLUGINS, "")
    return [s.strip() for s in raw.split(",") if s.strip()]


def discover(
    specs: Sequence[str] = (),
    *,
    use_entry_points: bool | None = None,
    use_env: bool = True,
    wanted: Collection[str] = (),
    strict: bool = False,
) -> Plugins:
    """Load every plugin: entry points, then ``FLEET_PLUGINS``, then ``specs``.

    Args:
        specs: ``MODULE`` or ``MODULE:ATTR`` strings to import directly.
        use_entry_points: Also load the ``fleet.automations`` entry points (default:
            unless ``FLEET_ENTRY_POINTS=0``).
        use_env: Also load the specs in ``FLEET_PLUGINS``.
        wanted: The types the caller needs (``fleet worker --type``), if it knows:
            loading stops as soon as they are all found. The specs load first, then
            the entry points named like a missing type, then the rest only if a type
            is still missing: a worker of one type never imports (nor waits for) the
            other plugins of its host. Empty: everything loads.
        strict: Raise for a *named* plugin that fails: the specs load first, and
            if one fails nothing else is imported; then the entry points named like a
            wanted type, the same way. The other entry points are only recorded as
            errors, as without ``strict``.

    Returns:
        The automation types found and the plugins that failed.

    Raises:
        PluginLoadError: With ``strict`` only: a named plugin failed to load (every
            named plugin of the same step is tried first, so all of them are reported).
    """
    if use_entry_points is None:
        use_entry_points = entry_points_enabled()
    all_specs = list(dict.fromkeys([*(env_specs() if use_env else []), *specs]))
    early = Plugins()  # the specs, loaded first when the caller waits on them
    first = bool(wanted) or strict
    if first:
        _load_specs(early, all_specs)
        if strict:
            early.raise_for_named()
        if not use_entry_points or (wanted and set(wanted) <= set(early.types)):
            return early
    eps = list(entry_points(group=GROUP)) if use_entry_points else []
    if wanted:
        missing = set(wanted) - set(early.types)
        by_name = Plugins()
        _load_entry_points(by_name, [ep for ep in eps if ep.name in missing], named=True)
        if strict:
            by_name.raise_for_named()
        _merge(by_name, early)
        early = by_name
        if set(wanted) <= set(early.types):
            return early
        eps = [ep for ep in eps if ep.name not in missing]
    found = Plugins()
    _load_entry_points(found, eps)
    if first:
        _merge(found, early)
    else:
        _load_specs(found, all_specs)
    return found


def _load_entry_points(found: Plugins, eps: Iterable[EntryPoint], *, named: bool = False) -> None:
    """Load ``eps`` into ``found``; ``named``: each was asked for as the type it is named
    like (``--type NAME``), so its error says which type it failed to provide."""
    for ep in eps:
        source = f"entry point {ep.name} = {ep.value}"
        try:
            _add(found, _load_entry_point(ep), source, _origin(ep))
        except Exception as exc:
            found.errors.append(_error(source, exc, provides=ep.name if named else ""))


def _load_specs(found: Plugins, specs: Iterable[str]) -> None:
    for spec in specs:
        source = f"--plugin {spec}"
        try:
            _add(found, load_spec(spec), source, source)
        except Exception as exc:
            error = _error(source, exc, named=True)
            if isinstance(exc, ModuleNotFoundError) and not error.location:
                # The spec's own module is missing (a nested import would have a frame
                # of the plugin): most often a typo, or a module in another folder.
                hint = " (not on sys.path, the current directory included)"
                error = replace(error, error=error.error + hint)
            found.errors.append(error)


def _merge(found: Plugins, later: Plugins) -> None:
    """``later`` loaded after ``found``: its classes win, the first source stays."""
    for name, cls in later.types.items():
        _add(found, [cls], later.sources[name], later.origins[name])
    found.errors.extend(later.errors)


#: Frames that are the import machinery or discovery, not the plugin's code.
_MACHINERY = (os.path.dirname(importlib.__file__) + os.sep, __file__)


def _location(exc: BaseException) -> str:
    """``<file>, line <n>: <text>`` of the plugin's code where ``exc`` was raised."""
    if isinstance(exc, SyntaxError) and exc.filename:
        # The parser's own position: the traceback only reaches the import statement.
        text = (exc.text or "").strip()
        return f"{exc.filename}, line {exc.lineno}" + (f": {text}" if text else "")
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<frozen") and not f.filename.startswith(_MACHINERY)
    ]
    if not frames:
        return ""
    last = frames[-1]
    return f"{last.filename}, line {last.lineno}" + (f": {last.line}" if last.line else "")


def _error(
    source: str, exc: BaseException, *, named: bool = False, provides: str = ""
) -> PluginError:
    # Commands show one line per failed plugin; the traceback is for --log-level DEBUG.
    log.debug("plugin %s failed to load", source, exc_info=exc)
    return PluginError(
        source=source,
        error=f"{type(exc).__name__}: {exc}",
        traceback="".join(traceback.format_exception(exc)),
        location=_location(exc),
        named=named or bool(provides),
        provides=provides,
    )
