"""Credentials inside URLs, masked: ``http://user:password@host`` becomes
``http://user:********@host``. Used by every answer of the master and by the log
format of every ``fleet`` process, so a proxy password never reaches a screen."""

from __future__ import annotations

import logging
import re

MASK = "********"
# scheme://user:password@host  ->  scheme://user:********@host
_URL_CREDENTIALS = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:)(?P<pw>[^@\s/]+)@")


def mask_url_credentials(text: str) -> str:
    """``text`` with the password of every URL in it masked."""
    if "@" not in text:
        return text
    return _URL_CREDENTIALS.sub(lambda m: f"{m.group('head')}{MASK}@", text)


class RedactingFormatter(logging.Formatter):
    """A log formatter whose lines never carry a URL's password."""

    def format(self, record: logging.LogRecord) -> str:
        return mask_url_credentials(super().format(record))
