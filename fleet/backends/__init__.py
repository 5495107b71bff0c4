"""Backends, selected by URL: ``memory://``, ``sqlite:///path``, ``redis://``.

Each backend lives in its own module, imported only when a URL asks for it;
other schemes come from the entry-point group ``fleet.backends`` (value:
``module:Class``, the class taking the URL as its one argument).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any
from urllib.parse import urlsplit

from fleet.backends.base import Backend, Subscription, with_env_namespace
from fleet.core.errors import UnsupportedBackend
from fleet.core.redact import absolute_sqlite_url, mask_credentials

__all__ = ["Backend", "Subscription", "backend_class", "open_backend", "redact_url"]

_BUILTIN = {
    "memory": ("fleet.backends.memory", "MemoryBackend", None),
    "sqlite": ("fleet.backends.sqlite", "SQLiteBackend", None),  # stdlib sqlite3
    "redis": ("fleet.backends.redis", "RedisBackend", "redis[hiredis]"),
    "rediss": ("fleet.backends.redis", "RedisBackend", "redis[hiredis]"),
    "unix": ("fleet.backends.redis", "RedisBackend", "redis[hiredis]"),
    "redis+sentinel": ("fleet.backends.redis", "RedisBackend", "redis[hiredis]"),
    "redis+cluster": ("fleet.backends.redis", "RedisBackend", "redis[hiredis]"),
    "rediss+cluster": ("fleet.backends.redis", "RedisBackend", "redis[hiredis]"),
}

DEFAULT_BACKEND_URL = "sqlite:///./fleet.db"


def backend_class(url: str) -> type[Backend]:
    """The Backend class for a URL's scheme.

    Raises:
        UnsupportedBackend: Unknown scheme, or the backend's driver is not installed
            (the message says what to ``pip install``).
    """
    scheme = urlsplit(url).scheme.lower()
    if not scheme:
        raise UnsupportedBackend(
            f"backend URL {redact_url(url)!r} has no scheme; use memory://, "
            "sqlite:///path/to/fleet.db or redis://host:6379/0"
        )
    if scheme in _BUILTIN:
        module_name, class_name, hint = _BUILTIN[scheme]
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            if hint is None or module_name in str(exc):
                raise
            raise UnsupportedBackend(
                f"the {scheme}:// backend needs {hint!r}: pip install '{hint}' ({exc})"
            ) from exc
        cls: type[Backend] = getattr(module, class_name)
        return cls
    for ep in entry_points(group="fleet.backends"):
        if ep.name == scheme:
            loaded: Any = ep.load()
            if not (isinstance(loaded, type) and issubclass(loaded, Backend)):
                raise UnsupportedBackend(f"entry point fleet.backends:{scheme} is not a Backend")
            return loaded
    if {"sentinel", "sentinels", "cluster"} & set(scheme.replace("-", "+").split("+")):
        # sentinel://, cluster://, redis-cluster://... (unless a plugin serves them)
        raise UnsupportedBackend(
            f"{scheme}:// is not a scheme of the Redis backend: use "
            "redis+sentinel://host:port[,host:port...]/service[/db] for Sentinel, "
            "redis+cluster://host:port[,host:port...] for Redis Cluster"
        )
    known = ", ".join(
        sorted({*_BUILTIN, *(ep.name for ep in entry_points(group="fleet.backends"))})
    )
    raise UnsupportedBackend(f"no backend for scheme {scheme!r}; known: {known}")


async def open_backend(url: str) -> Backend:
    """Create the backend for ``url`` and connect it.

    ``FLEET_NAMESPACE``, when set, is the URL's ``namespace`` option unless the URL
    names one itself: every key and channel of the fleet then carries it.

    Raises:
        UnsupportedBackend: See :func:`backend_class`.
        BackendUnavailable: The storage cannot be reached.
    """
    url = with_env_namespace(url)
    backend = backend_class(url)(url)  # type: ignore[call-arg]
    await backend.connect()
    return backend


def redact_url(url: str) -> str:
    """The backend URL as every banner and log line shows it: its password masked (by
    :func:`fleet.core.redact.mask_credentials`) and a relative SQLite path resolved
    (:func:`fleet.core.redact.absolute_sqlite_url`: ``./fleet.db`` names another file
    in every folder)."""
    return mask_credentials(absolute_sqlite_url(url), keep_user=True)
