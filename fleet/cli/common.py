"""What every CLI client command shares: master URL and token options, the
client, JSON or table output, clean error messages."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from fleet.cli.console import output_console
from fleet.cli.environment import load_settings
from fleet.cli.plain import plain
from fleet.client.http import ClientError, FleetClient
from fleet.client.tokenfile import UnsafeTokenFile, read_token, token_path

F = TypeVar("F", bound=Callable[..., Any])


def resolve_token(token: str | None) -> str | None:
    """``--token``, else ``FLEET_ADMIN_TOKEN``, else the local master's token file."""
    return token_and_source(token)[0]


def token_and_source(token: str | None) -> tuple[str | None, str | None]:
    """:func:`resolve_token` and where the token came from (``--token``,
    ``FLEET_ADMIN_TOKEN`` or the token file's path); ``(None, None)`` if nowhere.
    A refused token's message names the source, so the user knows what to fix."""
    if token:
        return token, "--token"
    env_token = load_settings().admin_token
    if env_token:
        return env_token, "FLEET_ADMIN_TOKEN"
    path = token_path()
    try:
        stored = read_token(path)
    except UnsafeTokenFile as exc:
        raise click.ClickException(str(exc)) from exc
    return (stored, str(path)) if stored else (None, None)


def resolve_url(url: str | None) -> str:
    """``--url``, else ``FLEET_MASTER_URL`` (default http://127.0.0.1:8000)."""
    if url:
        return url
    return load_settings().master_url


def client_options(func: F) -> F:
    """Add ``--url``, ``--token`` and ``--json`` to a command."""

    @click.option("--url", default=None, help="Master URL (FLEET_MASTER_URL).")
    @click.option("--token", default=None, help="Bearer token (FLEET_ADMIN_TOKEN).")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


@contextmanager
def open_client(url: str | None, token: str | None) -> Iterator[FleetClient]:
    """A client for the command; ClientErrors become clean ``Error: ...`` exits."""
    found, source = token_and_source(token)
    client = FleetClient(resolve_url(url), found, token_from=source)
    try:
        yield client
    except ClientError as exc:
        raise click.ClickException(plain(exc)) from None
    finally:
        client.close()


def console() -> Console:
    """The console of command output (full width on a pipe, see :mod:`fleet.cli.console`)."""
    return output_console()


def print_json(value: object) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=True, default=str))


def table(title: str | None, columns: list[str], rows: list[list[Any]]) -> None:
    """Print a rich table; on a pipe or a file, at full width (see :mod:`fleet.cli.console`)."""
    t = Table(title=title, show_lines=False)
    for col in columns:
        t.add_column(col)
    for row in rows:
        t.add_row(*(Text("" if v is None else plain(v)) for v in row))
    console().print(t)


def parse_json_arg(raw: str) -> Any:
    """A JSON argument: inline JSON, ``@file`` or ``-`` for stdin.

    Raises:
        click.BadParameter: Not valid JSON (the message says where).
    """
    if raw == "-":
        text = sys.stdin.read()
    elif raw.startswith("@"):
        try:
            with open(raw[1:], encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise click.BadParameter(f"cannot read {raw[1:]}: {exc}") from exc
    else:
        text = raw
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}") from exc


def parse_assignment(item: str) -> tuple[str, Any]:
    """``key=value`` with the value parsed as JSON when it is JSON (``slots=3``,
    ``enabled=false``), else kept as a string (``user_agent=Mozilla``)."""
    key, sep, raw = item.partition("=")
    if not sep or not key:
        raise click.BadParameter(f"expected key=value, got {item!r}")
    try:
        return key.strip(), json.loads(raw)
    except json.JSONDecodeError:
        return key.strip(), raw


def ago(seconds: Any) -> str:
    """A short human duration."""
    if seconds is None:
        return "-"
    s = float(seconds)
    if s < 60:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.1f}h"
