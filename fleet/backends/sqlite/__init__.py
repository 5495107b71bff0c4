"""The SQLite backend: one host, every process (``sqlite:///path``)."""

from fleet.backends.sqlite.backend import SQLiteBackend

__all__ = ["SQLiteBackend"]
