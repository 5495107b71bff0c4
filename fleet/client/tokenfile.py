"""Where a loopback master keeps the admin token it generated, and how clients find it.

A master started without ``FLEET_ADMIN_TOKEN`` on a loopback address generates a
token and writes it, readable by its owner only (mode 0600), to
``$XDG_STATE_HOME/fleet/admin-token`` if ``XDG_STATE_HOME`` is set, else to
``./.fleet/admin-token``. CLI client commands on the same machine read it when
neither ``--token`` nor ``FLEET_ADMIN_TOKEN`` is given.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
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


def read_token(path: Path | None = None) -> str | None:
    """The token stored at ``path`` (default :func:`token_path`), or None."""
    path = path or token_path()
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return token or None


def ensure_token(path: Path | None = None) -> tuple[str, Path]:
    """Reuse the stored token or generate one and store it with mode 0600.

    Reusing it keeps the CLI clients and dashboards of this machine working
    across master restarts.

    Returns:
        ``(token, path)``.
    """
    path = path or token_path()
    existing = read_token(path)
    if existing is not None:
        os.chmod(path, 0o600)
        return existing, path
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return token, path
