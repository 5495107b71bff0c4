"""``memory://<name>``: the whole backend in one process, for ``fleet run`` and tests.

The SQLite backend over an in-memory database (:mod:`fleet.backends.memory.engine`):
the same rules, written once, in SQL. The data lives in the named store of this
process (:mod:`fleet.backends.memory.store`), shared by every open of the same URL,
kept after the last ``close`` (like a file) until
:func:`~fleet.backends.memory.store.drop_store`; give each independent run its own
name. A namespace (``?namespace=``) is a store of its own.
"""

from __future__ import annotations

from fleet.backends.base import namespace_of
from fleet.backends.memory.store import get_db, store_name
from fleet.backends.sqlite.backend import SQLiteBackend


class MemoryBackend(SQLiteBackend):
    """In-process backend over the store named by ``memory://<name>``.

    Args:
        url: ``memory://`` (the store ``default``) or ``memory://<name>``.
    """

    def __init__(self, url: str) -> None:
        bare, namespace = namespace_of(url)
        name = store_name(bare)
        super().__init__(url, get_db(f"{name}@{namespace}" if namespace else name))
