"""Where a loopback master keeps the admin token it generated, and how clients find it.

A master started without ``FLEET_ADMIN_TOKEN`` on a loopback address generates a
token and writes it, readable by its owner only (mode 0600), to
``$XDG_STATE_HOME/fleet/admin-token`` if ``XDG_STATE_HOME`` is set, else to
``./.fleet/admin-token``. CLI client commands on the same machine read it when
neither ``--token`` nor ``FLEET_ADMIN_TOKEN`` is given.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import secrets
import stat
from pathlib import Path


def token_path(environ: dict[str, str] | None = None) -> Path:
    """The admin token file of this machine and directory."""
    env = os.environ if environ is None else environ
    state = env.get("XDG_STATE_HOME")
    if state:
        return Path(state) / "fleet" / "admin-token"
    return Path.cwd() / ".fleet" / "admin-token"


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses."""
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class UnsafeTokenFile(Exception):
    """The token file is a link, is not owned by this user, or others may read it."""


def _open_safely(path: Path, flags: int) -> int:
    """Open ``path`` without following a symbolic link, and only if this user owns
    it and nobody else may read or write it.

    Raises:
        UnsafeTokenFile: It is a link, someone else's, or open to others.
        OSError: It cannot be opened.
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeTokenFile(f"{path} is a symbolic link; refusing to use it") from exc
        raise
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = "is not a regular file"
    elif info.st_uid != os.getuid():
        problem = "is not owned by this user"
    elif info.st_mode & 0o077:
        problem = f"may be read or written by others (mode {info.st_mode & 0o777:o})"
    if problem is not None:
        os.close(fd)
        raise UnsafeTokenFile(f"{path} {problem}; refusing to use it (delete it, or fix it)")
    return fd


def read_token(path: Path | None = None) -> str | None:
    """The token stored at ``path`` (default :func:`token_path`), or None if there
    is none.

    Raises:
        UnsafeTokenFile: The file is a link, someone else's, or readable by others.
    """
    path = path or token_path()
    try:
        fd = _open_safely(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except UnsafeTokenFile:
        raise
    except OSError:
        return None
    with os.fdopen(fd, "r", encoding="utf-8") as f:
        token = f.read().strip()
    return token or None


def ensure_token(path: Path | None = None) -> tuple[str, Path]:
    """Reuse the stored token or generate one and store it with mode 0600.

    Reusing it keeps the CLI clients and dashboards of this machine working
    across master restarts. A stored token is reused only from a regular file
    owned by this user that nobody else may read or write, reached without a
    symbolic link: a planted file never becomes the admin token.

    Returns:
        ``(token, path)``.

    Raises:
        UnsafeTokenFile: The existing file is not safe to use.
    """
    path = path or token_path()
    existing = read_token(path)
    if existing is not None:
        return existing, path
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    # O_EXCL: never write through a link or into a file someone planted meanwhile.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        fd = _open_safely(path, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    return token, path
