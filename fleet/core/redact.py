"""Credentials inside URLs, masked: ``http://user:password@host`` becomes
``http://user:********@host``. Used by every answer of the master and by the log
format of every ``fleet`` process, so a proxy password never reaches a screen; the
same log format escapes control characters inside messages (no forged lines)."""

from __future__ import annotations

import logging
import os
import re
from urllib.parse import urlsplit

MASK = "********"
# scheme://user:password@host  ->  scheme://user:********@host
_URL_CREDENTIALS = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:)(?P<pw>[^@\s/]+)@")


def mask_url_credentials(text: str) -> str:
    """``text`` with the password of every URL in it masked."""
    if "@" not in text:
        return text
    return _URL_CREDENTIALS.sub(lambda m: f"{m.group('head')}{MASK}@", text)


def absolute_sqlite_url(url: str) -> str:
    """A ``sqlite:///relative/path`` URL with its path resolved against the working
    folder (``sqlite:////abs/path``), for banners and log lines: the default
    ``sqlite:///./fleet.db`` names a different file in every folder a process starts
    in, which the relative form hides. Any other URL comes back unchanged."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "sqlite" or parts.netloc:
        return url
    raw = parts.path[1:] if parts.path.startswith("/") else parts.path
    if not raw or raw.startswith("/") or raw == ":memory:" or raw.startswith("file:"):
        return url
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}:///{os.path.abspath(raw)}{query}"  # abspath starts with /


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]|\r|\n")


def escape_controls(text: str) -> str:
    """``text`` with control characters shown escaped (``\\n``, ``\\x1b``): a value
    logged inside a message (a task id pushed by hand into Redis) cannot start a
    forged line or move the terminal's cursor."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/@]+@")


def mask_credentials(text: str) -> str:
    """``text`` with the whole ``user:password@`` of every URL in it replaced by
    ``***@`` (proxy user names often carry session ids: they go too)."""
    return _USERINFO.sub(r"\1***@", text)


class RedactingFormatter(logging.Formatter):
    """A log formatter whose lines never carry a URL's password, and whose message
    is one line (control characters escaped; a traceback still follows it)."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        clean = escape_controls(message)
        if clean != message:
            record = logging.makeLogRecord({**record.__dict__, "msg": clean, "args": None})
        return mask_url_credentials(super().format(record))
