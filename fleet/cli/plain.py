"""What the CLI prints of text it did not write: without control characters.

Error messages, progress messages, task ids and payloads come from tasks and from
whoever submitted them. Printed raw, an escape sequence in one of them could move the
cursor, recolour or retitle the terminal, hide lines or fake output; rich would also
read ``[bold]``-style markup in a table cell as its own. So every such text goes
through :func:`plain` (C0 and C1 control characters, DEL and the bidirectional
overrides shown as ``\\u00XX`` escapes, which are also valid inside a JSON string;
newlines and tabs kept) and into rich as a ``Text``, never as markup.
"""

from __future__ import annotations

import re
from typing import Any

import click

# C0 controls but tab and newline, DEL, C1 controls, and the Unicode bidi controls
# that reorder what a terminal shows (the "Trojan Source" characters).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"


def plain(value: Any) -> str:
    """``value`` as text a terminal shows as it is: control characters escaped."""
    text = value if isinstance(value, str) else str(value)
    return _CONTROL.sub(_escape, text)


def echo(message: Any = "", *, err: bool = False) -> None:
    """``click.echo`` of :func:`plain` text."""
    click.echo(plain(message), err=err)
