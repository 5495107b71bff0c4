"""Child processes of ``fleet dev``, their output prefixed and interleaved in one terminal."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import re
import signal
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import click

from fleet.core.logs import log_format

#: Colour of each component's prefix (when the terminal has colours).
COLOURS = {"master": "cyan", "worker": "green", "demo": "magenta", "dev": "yellow"}
PREFIX_WIDTH = 6

#: Per-request lines (httpx client requests, uvicorn access log) that would bury
#: everything else; shown with ``fleet dev --verbose``.
_CHATTER = re.compile(
    r' httpx: HTTP Request: |^INFO: +[\[\]0-9a-f.:]+:\d+ - "'
    r'|"logger": "(?:httpx|uvicorn\.access)"'
)


def is_chatter(line: str) -> bool:
    """True for one-line-per-request log lines."""
    return _CHATTER.search(line) is not None


def prefix_line(name: str, line: str, colour: bool) -> str:
    """``"name   | line"``, the name padded so that columns line up."""
    label = f"{name:<{PREFIX_WIDTH}} |"
    if colour:
        label = click.style(label, fg=COLOURS.get(name, "white"))
    return f"{label} {line}"


def json_line(name: str, line: str) -> str:
    """A child's line as one JSON object naming its ``component``: a child's own JSON
    log line gains the field; anything else (a banner, a stray print) becomes the
    ``message`` of a new object, so every line ``fleet dev`` writes parses."""
    try:
        record = json.loads(line)
    except ValueError:
        record = None
    if not isinstance(record, dict):
        record = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "level": "INFO",
            "logger": f"fleet.dev.{name}",
            "message": line,
        }
    record["component"] = name
    return json.dumps(record, ensure_ascii=False)


def make_echo(
    colour: bool | None = None, structured: bool | None = None
) -> Callable[[str, str], None]:
    """A printer of ``(component, line)`` to stdout, coloured on a terminal; one JSON
    object per line with ``FLEET_LOG_FORMAT=json`` (``structured``)."""
    use_colour = sys.stdout.isatty() if colour is None else colour
    as_json = (log_format() == "json") if structured is None else structured

    def echo(name: str, line: str) -> None:
        click.echo(json_line(name, line) if as_json else prefix_line(name, line, use_colour))

    return echo


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM when ``fleet dev`` dies, even by SIGKILL,
    so no orphaned master keeps holding its port (Linux only; elsewhere a no-op)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Child:
    """One component running as a child process.

    It gets its own session, so a Ctrl-C in the terminal reaches only ``fleet dev``,
    which then stops each child exactly once (a second SIGINT would make the
    worker skip its graceful drain).

    Args:
        name: The component name used as the output prefix.
        argv: The command line.
        env: The child's environment.
        echo: Where prefixed output lines go.
        quiet: Drop per-request chatter (see :func:`is_chatter`).
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        env: dict[str, str],
        echo: Callable[[str, str], None],
        *,
        quiet: bool = False,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = env
        self._echo = echo
        self._quiet = quiet
        self.proc: asyncio.subprocess.Process | None = None
        self._pump: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Spawn the process and start copying its output (stdout and stderr)."""
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=self.env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        self._pump = asyncio.create_task(self._copy_output(), name=f"output:{self.name}")

    async def _copy_output(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while True:
            raw = await self.proc.stdout.readline()
            if not raw:
                return
            line = raw.decode(errors="replace").rstrip()
            if not (self._quiet and is_chatter(line)):
                self._echo(self.name, line)

    @property
    def returncode(self) -> int | None:
        """The exit status once it exited (negative: killed by that signal)."""
        return None if self.proc is None else self.proc.returncode

    async def wait(self) -> int:
        """Wait for exit and for the last line of output; returns the exit status."""
        assert self.proc is not None
        code = await self.proc.wait()
        if self._pump is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._pump, 5)
        return code

    def kill(self) -> None:
        """SIGKILL the child and anything it started (its whole session)."""
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    async def stop(self, timeout: float) -> bool:
        """SIGINT, wait up to ``timeout`` seconds, then SIGKILL.

        Returns:
            True if it exited by itself within ``timeout``.
        """
        if self.proc is None or self.proc.returncode is not None:
            return True
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(self.wait(), timeout)
            return True
        except TimeoutError:
            self._echo("dev", f"{self.name} did not stop within {timeout:.0f}s; killing it")
            self.kill()
            await self.wait()
            return False
