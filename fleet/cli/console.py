"""Rich consoles for command output, shared by every ``fleet`` subcommand.

On a terminal, tables fit its width. On a pipe or a file rich would assume 80
columns and cut cells with an ellipsis (``fleet workers | grep ...`` would miss
what was cut), so there the console gets a width no table reaches: rich never
pads a table out to the console's width, so each table is as wide as its content.
"""

from __future__ import annotations

import sys

from rich.console import Console

#: Width given to rich when stdout is not a terminal.
PIPE_WIDTH = 10_000


def stdout_is_terminal() -> bool:
    """Whether stdout is an interactive terminal (not a pipe, a file or a test runner)."""
    isatty = getattr(sys.stdout, "isatty", None)
    return bool(isatty is not None and isatty())


def output_console() -> Console:
    """The console of command output: the terminal's width on a terminal; on a pipe
    or a file, no colours and no width limit, so nothing is cut off."""
    if stdout_is_terminal():
        return Console(soft_wrap=False)
    return Console(soft_wrap=False, width=PIPE_WIDTH, no_color=True)


def progress_console() -> Console:
    """Where progress bars go: stderr, so stdout keeps only the command's result."""
    return Console(stderr=True)
