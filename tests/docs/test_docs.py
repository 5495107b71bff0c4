"""Keep docs/ honest: commands, options, routes, environment variables and links
named in the documentation must exist in the code.

The extractors are plain functions over markdown text; each check compares what
they find with the real click group, the master's OpenAPI document, the
settings model and the files on disk.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from fleet.cli import COMMANDS, main
from fleet.master.app import create_app
from fleet.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))

_FENCE = re.compile(r"^```(\w*)\s*$")
_INLINE = re.compile(r"`([^`\n]+)`")
#: ``fleet <cmd> [<sub>]`` where a command starts: at the start of a fragment (after
#: ``sudo`` or ``VAR=value`` prefixes), after a path (``.venv/bin/fleet``), after
#: ``python -m`` or after a shell operator; not ``pip install fleet my-plugin``.
_FLEET_CMD = re.compile(
    r"(?:^\s*(?:\$\s+)?(?:sudo\s+)?(?:[A-Z_]+=\S+\s+)*|/|-m\s+|[;&|(]\s*)"
    r"fleet ((?:[a-z][a-z-]*)(?: [a-z][a-z-]*)?)"
)
_ROUTE = re.compile(r"\b(GET|POST|PUT|PATCH|DELETE) (/[^\s`?]*)")
_ENV = re.compile(r"\bFLEET_[A-Z0-9_]*[A-Z0-9]\b")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (.+?)\s*$")
_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z-]*|-[a-zA-Z])\b")
#: Fenced blocks whose lines are shell commands (other blocks, e.g. conf, are not).
SHELL_FENCES = {"bash", "sh", "shell", "text", ""}


def code_fragments(markdown: str) -> list[str]:
    """Inline code spans and lines of shell-like fenced blocks, in order."""
    out: list[str] = []
    fence: str | None = None
    for line in markdown.splitlines():
        opened = _FENCE.match(line.strip())
        if opened is not None:
            fence = None if fence is not None else opened.group(1)
            continue
        if fence is not None:
            if fence in SHELL_FENCES:
                out.append(line)
            continue
        out.extend(_INLINE.findall(line))
    return out


def fleet_commands(markdown: str) -> set[tuple[str, ...]]:
    """``("config", "set")``-style word pairs following ``fleet `` in code."""
    found: set[tuple[str, ...]] = set()
    for fragment in code_fragments(markdown):
        for match in _FLEET_CMD.finditer(fragment):
            found.add(tuple(match.group(1).split()))
    return found


def routes(markdown: str) -> set[tuple[str, str]]:
    """``(METHOD, normalised path)`` of every route named in code spans."""
    found = set()
    for fragment in code_fragments(markdown):
        for method, path in _ROUTE.findall(fragment):
            if "…" not in path and path.startswith(("/api/", "/healthz", "/readyz", "/metrics")):
                found.add((method, normalise_path(path)))
    return found


def normalise_path(path: str) -> str:
    """Path parameters compared by position only: ``{type}`` == ``{automation_type}``."""
    return re.sub(r"\{[^}]+\}", "{}", path.rstrip("/") or "/")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = heading.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def prose(markdown: str) -> str:
    """The text outside fenced blocks and inline code spans."""
    kept = []
    in_fence = False
    for line in markdown.splitlines():
        if _FENCE.match(line.strip()):
            in_fence = not in_fence
        elif not in_fence:
            kept.append(_INLINE.sub("", line))
    return "\n".join(kept)


def anchors(markdown: str) -> set[str]:
    """Anchors of every heading outside fenced blocks."""
    found = set()
    in_fence = False
    for line in markdown.splitlines():
        if _FENCE.match(line.strip()):
            in_fence = not in_fence
        elif not in_fence and (m := _HEADING.match(line)):
            found.add(slug(m.group(1)))
    return found


def cli_sections(markdown: str) -> dict[str, str]:
    """Text of each ``### `fleet <cmd> ...` `` section of cli.md, by command name."""
    sections: dict[str, str] = {}
    current: str | None = None
    for line in markdown.splitlines():
        m = re.match(r"^###\s+`fleet ([a-z-]+)", line)
        if m is not None:
            current = m.group(1)
            sections[current] = ""
        elif line.startswith("## "):
            current = None
        elif current is not None:
            sections[current] += line + "\n"
    return sections


def command_options(command: click.Command) -> set[str]:
    """Every option string of a command (and of a group's subcommands)."""
    opts = {"--help", "-h"}
    for param in command.params:
        opts.update(getattr(param, "opts", []))
        opts.update(getattr(param, "secondary_opts", []))
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            opts |= command_options(sub)
    return opts


def _command(name: str) -> click.Command | None:
    with click.Context(main) as ctx:
        return main.get_command(ctx, name)


def _read(page: Path) -> str:
    return page.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def openapi_routes() -> set[tuple[str, str]]:
    app = create_app(Settings(backend_url="memory://"), plugins=False, sweeper=False)
    spec = app.openapi()
    return {
        (method.upper(), normalise_path(path))
        for path, ops in spec["paths"].items()
        for method in ops
    }


def test_extractors_find_what_the_pages_hold() -> None:
    # Guards against a regex that silently matches nothing.
    assert len(routes(_read(DOCS / "rest-api.md"))) >= 25
    assert {c[0] for c in fleet_commands(_read(DOCS / "cli.md"))} >= set(COMMANDS)
    assert len(cli_sections(_read(DOCS / "cli.md"))) >= len(COMMANDS)
    assert slug("### `fleet doctor`".lstrip("# ")) == "fleet-doctor"
    assert slug("SQLite: one host only") == "sqlite-one-host-only"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_fleet_command_exists(page: Path) -> None:
    unknown = []
    for words in sorted(fleet_commands(_read(page))):
        command = _command(words[0])
        if command is None:
            unknown.append(" ".join(words))
        elif isinstance(command, click.Group) and len(words) > 1:
            if words[1] not in command.commands:
                unknown.append(" ".join(words))
    assert not unknown, f"{page.name} names commands the CLI lacks: {unknown}"


def test_every_cli_command_is_documented() -> None:
    sections = cli_sections(_read(DOCS / "cli.md"))
    with click.Context(main) as ctx:
        names = set(main.list_commands(ctx))
    assert names <= set(sections), f"cli.md lacks sections for {sorted(names - set(sections))}"


def test_cli_options_exist() -> None:
    wrong = []
    for name, text in cli_sections(_read(DOCS / "cli.md")).items():
        command = _command(name)
        assert command is not None, name
        known = command_options(command) | {"--log-level"}
        for fragment in code_fragments(text):
            if "fleet " in fragment:  # options of the command, not of `python -m`
                fragment = fragment[fragment.index("fleet ") :]
            bad = [opt for opt in _OPTION.findall(fragment) if opt not in known]
            wrong += [f"fleet {name} {opt}" for opt in bad]
    assert not wrong, f"cli.md documents options that do not exist: {sorted(set(wrong))}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_documented_route_exists(page: Path, openapi_routes: set[tuple[str, str]]) -> None:
    missing = sorted(routes(_read(page)) - openapi_routes)
    assert not missing, f"{page.name} documents routes the master does not serve: {missing}"


def test_every_route_is_documented(openapi_routes: set[tuple[str, str]]) -> None:
    documented = routes(_read(DOCS / "rest-api.md"))
    missing = sorted(openapi_routes - documented)
    assert not missing, f"rest-api.md does not document: {missing}"


def test_every_fleet_variable_exists() -> None:
    settings_vars = {f"FLEET_{name.upper()}" for name in Settings.model_fields}
    source = "\n".join(_read(p) for p in (ROOT / "fleet").rglob("*.py"))
    unknown = set()
    for page in PAGES:
        for var in _ENV.findall(_read(page)):
            if var not in settings_vars and var not in source:
                unknown.add(f"{page.name}: {var}")
    assert not unknown, f"docs name variables Fleet never reads: {sorted(unknown)}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in _LINK.findall(prose(_read(page))):
        if re.match(r"^[a-z]+:", target):
            continue  # http:, https:, mailto:
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(_read(dest)):
            broken.append(target)
    assert not broken, f"{page.name} has broken links: {broken}"


def test_the_readme_cli_table_names_every_command() -> None:
    readme = _read(ROOT / "README.md")
    table = readme[readme.index("## The CLI") :]
    table = table[: table.index("\n## ")]
    with click.Context(main) as ctx:
        names = set(main.list_commands(ctx))
    listed = {words[0] for words in fleet_commands(table)}
    assert names <= listed, f"README's CLI table lacks {sorted(names - listed)}"
