"""Credentials, masked: every ``user:password@`` (or bare ``user@``) of a URL in a text,
found by :func:`mask_credentials`, the one masking function of Fleet. The master's
answers, the log format of every ``fleet`` process, the reasons of ``report_bad`` and
the backend URLs printed in banners all go through it, so a proxy password never
reaches a screen; the same log format escapes control characters inside messages (no
forged lines)."""

from __future__ import annotations

import logging
import os
import re
from urllib.parse import urlsplit

MASK = "********"

# Where a URL's userinfo can sit in free text. urlsplit (and so every HTTP client) takes
# the netloc up to the first / ? # and the userinfo up to its *last* @, so a password may
# hold @ and : ; the greedy run below ends at that last @ too. Forms Fleet accepts:
#   scheme://user:password@host   scheme://user@host   (password with @ or :)
#   user:password@host            (no scheme: proxy_url entries get http:// added)
#   user@host:port, user@host     (no scheme, user name only: the host has a port, a
#                                  dot or is an address; an e-mail address looks the
#                                  same and is masked too, which costs nothing)
# A bare form must start a token (after a space, a quote, a bracket, , ; = |), or the
# path of a URL ("https://x.test/a@b") would be taken for one.
_CREDENTIALS = re.compile(
    r"""
    (?P<scheme>[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<info>[^\s/?#]*)@
    |
    (?<![^\s'"(\[{<,;=|])
    (?P<bare>
        [^\s/?#:@'"]+:[^\s/?#]*
      | [^\s/?#:@'"]+(?=@(?:\[[^\]\s]*\]|[^\s/?#@:\[\]]+):\d)
      | [^\s/?#:@'"]+(?=@(?:\[[^\]\s]*\]|localhost\b|[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+\b))
    )@
    """,
    re.VERBOSE,
)
# How a list of URLs (proxy_url) is split: the worker splits on commas and newlines.
_LIST_SEPARATOR = re.compile(r"([,\n])")


def _mask_info(info: str, keep_user: bool) -> str:
    # The user name is what precedes the first colon (as urlsplit reads it). Without a
    # password the user name is the credential itself (an API key): always masked.
    user, colon, _ = info.partition(":")
    if keep_user and colon:
        return f"{user}:{MASK}"
    return MASK


def _mask_text(text: str, keep_user: bool) -> str:
    def replace(m: re.Match[str]) -> str:
        if m.group("scheme") is not None:
            return f"{m.group('scheme')}{_mask_info(m.group('info'), keep_user)}@"
        return f"{_mask_info(m.group('bare'), keep_user)}@"

    return _CREDENTIALS.sub(replace, text)


def mask_credentials(text: str, *, keep_user: bool = False, url_list: bool = False) -> str:
    """``text`` with the credentials of every URL in it masked as ``********``.

    Args:
        text: Free text (a log line, an error, a reason) or a config value.
        keep_user: Keep the user name in front of a masked password
            (``http://user:********@host``), so an admin tells accounts apart in a
            config; a user name without a password is the credential itself and is
            masked anyway (``http://********@host``). False masks the whole
            ``user:password`` (reasons, worker errors: user names often carry
            session ids).
        url_list: ``text`` is a list of URLs (``proxy_url``: comma or newline
            separated), each of which is a URL even without a scheme, so
            ``apikey@gateway`` is masked too (in free text a bare ``user@host`` is
            taken for a credential only when its host has a port, a dot or is
            ``localhost``).
    """
    if "@" not in text:
        return text
    if not url_list:
        return _mask_text(text, keep_user)
    parts = _LIST_SEPARATOR.split(text)
    for i in range(0, len(parts), 2):  # even items are entries, odd ones separators
        entry = parts[i]
        if "@" not in entry:
            continue
        stripped = entry.lstrip()
        lead = entry[: len(entry) - len(stripped)]
        if "://" in stripped:
            parts[i] = lead + _mask_text(stripped, keep_user)
        else:  # the worker reads it as http://<entry>
            parts[i] = lead + _mask_text(f"http://{stripped}", keep_user)[len("http://") :]
    return "".join(parts)


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


class RedactingFormatter(logging.Formatter):
    """A log formatter whose lines never carry a URL's password, and whose message
    is one line (control characters escaped; a traceback still follows it)."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        clean = escape_controls(message)
        if clean != message:
            record = logging.makeLogRecord({**record.__dict__, "msg": clean, "args": None})
        return mask_credentials(super().format(record), keep_user=True)
