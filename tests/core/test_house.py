"""The house rules of docs/architecture.md, checked on the source tree: imports flow one
way (no circle in ``fleet``; ``fleet.core`` imports no other ``fleet`` package at run time),
the master in layers (``http/``, ``services/``, thin ``routes/``; services never import
routes nor a web framework, the HTTP edge imports neither), no module grows past 800
lines, and no function of ``fleet/worker`` past 60."""

from __future__ import annotations

import abc
import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "fleet"
MAX_LINES = 800
MAX_WORKER_FUNCTION_LINES = 60
#: A route parses, calls a service and answers: signature and docstring included.
MAX_ROUTE_FUNCTION_LINES = 25


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PKG.rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(
    tree: ast.AST, module: str, *, top_level_only: bool, type_only: bool = False
) -> set[str]:
    """Fleet modules imported at run time (``if TYPE_CHECKING:`` blocks skipped, unless
    ``type_only``: then they count too).

    ``from pkg import name`` counts as an import of ``pkg.name`` when that is a module,
    else of ``pkg``: importing a submodule needs its parent package only to be
    importing, not imported, so parent packages are not edges of their own.
    """
    found: set[str] = set()
    is_pkg = MODULES.get(module, Path()).name == "__init__.py"

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child) and not type_only:
                for other in child.orelse:
                    visit(other)
                continue
            if top_level_only and isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            ):
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = module.split(".") if is_pkg else module.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (child.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    found.add(sub if sub in MODULES else base)
            visit(child)

    visit(tree)
    return {m for m in found if m == "fleet" or m.startswith("fleet.")}


def _graph(*, top_level_only: bool, type_only: bool = False) -> dict[str, set[str]]:
    return {
        name: _imports(
            ast.parse(path.read_text()), name, top_level_only=top_level_only, type_only=type_only
        )
        & set(MODULES)
        for name, path in MODULES.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def strong(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_the_checker_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize(
    ("top_level_only", "type_only"),
    [(True, False), (False, False), (False, True)],
    ids=["import-time", "any-import", "even-type-only"],
)
def test_no_import_circle_in_fleet(top_level_only: bool, type_only: bool) -> None:
    assert _cycles(_graph(top_level_only=top_level_only, type_only=type_only)) == []


def test_the_type_only_graph_sees_type_checking_imports() -> None:
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import fleet.core\n")
    assert _imports(tree, "fleet.x", top_level_only=False) == set()
    assert _imports(tree, "fleet.x", top_level_only=False, type_only=True) == {"fleet.core"}


def test_backends_import_no_worker_master_or_cli_code() -> None:
    graph = _graph(top_level_only=False, type_only=True)
    offenders = {
        f"{name} -> {dep}"
        for name, deps in graph.items()
        if name.startswith("fleet.backends")
        for dep in deps
        if dep.split(".")[1] in ("worker", "master", "cli", "dev", "scheduler", "client")
    }
    assert offenders == set()


#: The one way out of fleet.core: a function task's ``.submit()`` opens a backend or a
#: master client (fleet/sending.py), imported when a submit is made, never at import.
CORE_EXITS = {"fleet.core.functions -> fleet.sending"}


def test_core_imports_no_other_fleet_package_at_run_time() -> None:
    graph = _graph(top_level_only=False, type_only=True)
    outside = {
        f"{name} -> {dep}"
        for name, deps in graph.items()
        if name.startswith("fleet.core")
        for dep in deps
        if dep != "fleet" and not dep.startswith("fleet.core")
    }
    assert outside == CORE_EXITS
    at_import = {
        f"{name} -> {dep}"
        for name, deps in _graph(top_level_only=True, type_only=False).items()
        if name.startswith("fleet.core")
        for dep in deps
        if dep != "fleet" and not dep.startswith("fleet.core")
    }
    assert at_import == set()
    code = "import sys, fleet.core; print(sorted(m for m in sys.modules if m.startswith('fleet.')))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert all(m.startswith("fleet.core") for m in eval(loaded.stdout))  # a list literal


def test_master_services_never_import_a_route_module() -> None:
    graph = _graph(top_level_only=False)
    offenders = {
        f"{name} -> {dep}"
        for name, deps in graph.items()
        if name.startswith("fleet.master.") and not name.startswith("fleet.master.routes")
        and name not in ("fleet.master.app",)  # the app mounts the routers
        for dep in deps
        if dep.startswith("fleet.master.routes")
    }  # fmt: skip
    assert offenders == set()


def test_the_master_top_level_holds_the_app_and_its_layers() -> None:
    master = PKG / "master"
    modules = sorted(p.name for p in master.glob("*.py"))
    assert modules == ["__init__.py", "app.py", "serve.py", "state.py"]
    folders = sorted(p.name for p in master.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == ["dashboard", "http", "routes", "services"]


def test_the_master_http_edge_imports_no_route_and_no_service() -> None:
    graph = _graph(top_level_only=False, type_only=True)
    offenders = {
        f"{name} -> {dep}"
        for name, deps in graph.items()
        if name.startswith("fleet.master.http")
        for dep in deps
        if dep.startswith("fleet.master.") and not dep.startswith("fleet.master.http")
    }
    assert offenders == set()


def test_master_services_import_neither_the_app_nor_the_edge() -> None:
    # The request and response bodies (http/models.py) are the wire's shapes: a
    # service may parse with them; nothing else of the edge, nor the app or its state.
    graph = _graph(top_level_only=False, type_only=True)
    offenders = {
        f"{name} -> {dep}"
        for name, deps in graph.items()
        if name.startswith("fleet.master.services")
        for dep in deps
        if dep.startswith("fleet.master.")
        and not dep.startswith("fleet.master.services")
        and dep != "fleet.master.http.models"
    }
    assert offenders == set()


#: The web framework's packages: only the master's edge and its routes speak HTTP.
WEB_FRAMEWORKS = ("fastapi", "starlette", "sse_starlette")


def web_imports(root: Path) -> dict[str, list[str]]:
    """Modules under ``root`` importing a web framework (even for typing), and what."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        names: list[str] = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.append(node.module)
        web = sorted({n for n in names if n.split(".")[0] in WEB_FRAMEWORKS})
        if web:
            found[path.relative_to(root).as_posix()] = web
    return found


def test_the_web_import_checker_finds_one(tmp_path: Path) -> None:
    (tmp_path / "fine.py").write_text("import json\nfrom fleet.core.errors import NotFound\n")
    (tmp_path / "web.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from starlette.requests "
        "import Request\ndef f():\n    import fastapi\n"
    )
    assert web_imports(tmp_path) == {"web.py": ["fastapi", "starlette.requests"]}


def test_master_services_import_no_web_framework() -> None:
    # Services raise fleet.core.errors; fleet/master/http/errors.py makes them HTTP.
    assert web_imports(PKG / "master" / "services") == {}


def test_routes_are_thin() -> None:
    assert long_functions(PKG / "master" / "routes", MAX_ROUTE_FUNCTION_LINES) == {}


def routers_outside_routes(master: Path) -> list[str]:
    """Modules of ``master`` (outside its ``routes/``) that build a FastAPI router."""
    found = []
    for path in sorted(master.rglob("*.py")):
        if "routes" in path.relative_to(master).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and (
                (isinstance(node.func, ast.Name) and node.func.id == "APIRouter")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "APIRouter")
            ):
                found.append(str(path.relative_to(master)))
                break
    return found


def test_the_router_checker_finds_a_router(tmp_path: Path) -> None:
    (tmp_path / "routes").mkdir()
    (tmp_path / "routes" / "fine.py").write_text("router = APIRouter()\n")
    (tmp_path / "service.py").write_text("import fastapi\nrouter = fastapi.APIRouter()\n")
    assert routers_outside_routes(tmp_path) == ["service.py"]


def test_every_router_lives_in_master_routes() -> None:
    assert routers_outside_routes(PKG / "master") == []


def test_every_backend_is_a_package_exposing_its_class() -> None:
    for package, cls in (("memory", "MemoryBackend"), ("sqlite", "SQLiteBackend"),
                         ("redis", "RedisBackend")):  # fmt: skip
        init = PKG / "backends" / package / "__init__.py"
        assert init.exists() and cls in init.read_text()
    flat = sorted(p.name for p in (PKG / "backends").glob("*.py"))
    assert flat == ["__init__.py", "base.py", "waiting.py"]  # the rest lives in a package


def test_no_module_over_800_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in PKG.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def _functions(node: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, lines) of every function under ``node``, nested ones too."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            assert child.end_lineno is not None
            yield f"{prefix}{child.name}", child.end_lineno - child.lineno + 1
            yield from _functions(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")
        else:
            yield from _functions(child, prefix)


def long_functions(root: Path, limit: int) -> dict[str, int]:
    """Functions and methods of the modules under ``root`` longer than ``limit``
    lines (``def`` line to last line, decorators aside), as ``path:qualname``."""
    return {
        f"{path.relative_to(root).as_posix()}:{name}": lines
        for path in sorted(root.rglob("*.py"))
        for name, lines in _functions(ast.parse(path.read_text()))
        if lines > limit
    }


def _function(name: str, lines: int, indent: str = "") -> str:
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(lines - 1))
    return f"{indent}def {name}():\n{body}"


def test_the_function_checker_finds_a_long_function(tmp_path: Path) -> None:
    (tmp_path / "fine.py").write_text(_function("at_the_limit", 60))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text(
        "class Slot:\n    @staticmethod\n"
        + _function("handle", 61, "    ")
        + "def outer():\n"
        + _function("inner", 61, "    ")
    )
    assert long_functions(tmp_path, 60) == {
        "pkg/long.py:Slot.handle": 61,
        "pkg/long.py:outer": 62,
        "pkg/long.py:outer.inner": 61,
    }


def test_no_function_in_the_worker_over_60_lines() -> None:
    assert long_functions(PKG / "worker", MAX_WORKER_FUNCTION_LINES) == {}


#: The most abstract methods one capability interface may have: a capability that
#: needs more is two capabilities.
MAX_ABSTRACT_METHODS = 16
#: Capabilities that are objects of their own (``backend.<attr>``), by the module each
#: backend package builds them in.
#: Every capability of ``Backend`` is an attribute, built from the module of this
#: name in each backend package.
CAPABILITY_OBJECTS = {
    **{
        name: name
        for name in (
            "queues",
            "groups",
            "streams",
            "pools",
            "events",
            "browse",
            "limits",
            "proxies",
            "configs",
            "runs",
            "schedules",
            "history",
        )
    },
    "kv": "primitives",
    "locks": "primitives",
    "counters": "primitives",
    "catalog": "state",
    "workers": "state",
}
#: What a backend class itself defines: its lifecycle, nothing of a capability.
LIFECYCLE = {"connect", "close", "ping", "purge_type"}


def abstract_methods(path: Path) -> dict[str, int]:
    """Per class of a module, how many methods it marks ``@abc.abstractmethod``."""
    counts: dict[str, int] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef):
            counts[node.name] = sum(
                1
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                and any(ast.unparse(d).endswith("abstractmethod") for d in item.decorator_list)
            )
    return counts


def test_the_abstract_method_counter_counts(tmp_path: Path) -> None:
    src = tmp_path / "cap.py"
    src.write_text(
        "import abc\nclass C(abc.ABC):\n    @abc.abstractmethod\n    def a(self): ...\n"
        "    @abc.abstractmethod\n    async def b(self): ...\n    def c(self): ...\n"
    )
    assert abstract_methods(src) == {"C": 2}


def test_no_capability_interface_over_16_abstract_methods() -> None:
    big = {
        f"{path.name}:{cls}": n
        for path in sorted((PKG / "core" / "capabilities").glob("*.py"))
        for cls, n in abstract_methods(path).items()
        if n > MAX_ABSTRACT_METHODS
    }
    assert big == {}


#: The engines: each writes every rule once (SQL, Lua). memory:// is the SQLite engine
#: over an in-memory database, so its package is wiring only.
ENGINES = ("sqlite", "redis")
#: All that ``backends/memory/`` may hold: the backend, its engine, its stores.
MEMORY_WIRING = {"__init__.py", "backend.py", "engine.py", "store.py"}


def test_capability_objects_have_their_module_in_every_engine_package() -> None:
    for attr, module in CAPABILITY_OBJECTS.items():
        for package in ENGINES:
            assert (PKG / "backends" / package / f"{module}.py").exists(), (package, module)
        base = (PKG / "backends" / "base.py").read_text()
        assert f"    {attr}: " in base, attr  # an attribute of Backend, not mixed in


def test_the_memory_backend_holds_no_state_machine() -> None:
    from fleet.backends.memory import MemoryBackend
    from fleet.backends.sqlite import SQLiteBackend

    held = {p.name for p in (PKG / "backends" / "memory").glob("*.py")}
    assert held <= MEMORY_WIRING, held - MEMORY_WIRING
    assert MemoryBackend.__mro__[1] is SQLiteBackend


def test_backend_classes_only_wire_capabilities() -> None:
    from fleet.backends.base import Backend
    from fleet.backends.memory import MemoryBackend
    from fleet.backends.redis import RedisBackend
    from fleet.backends.sqlite import SQLiteBackend
    from fleet.core.capabilities import TaskCapabilities

    assert Backend.__bases__ == (TaskCapabilities, abc.ABC)  # nothing mixed in
    for cls in (MemoryBackend, SQLiteBackend, RedisBackend):
        public = {
            name
            for name, value in vars(cls).items()
            if callable(value) and not name.startswith("_")
        }
        assert public <= LIFECYCLE, (cls.__name__, public - LIFECYCLE)
    for attr in CAPABILITY_OBJECTS:
        assert attr in Backend.__annotations__, attr


def test_the_backend_wiring_checker_sees_a_capability_method(tmp_path: Path) -> None:
    class Leaky:
        async def connect(self) -> None: ...
        async def push(self) -> None: ...

    public = {n for n, v in vars(Leaky).items() if callable(v) and not n.startswith("_")}
    assert public - LIFECYCLE == {"push"}
