"""Huey's side of ``bench/sqlite_vs_huey.py`` (runs in Huey's own venv, not Fleet's).

The app: SqliteHuey's storage on ``$HUEY_FILE`` with WAL and ``synchronous`` set by
``$HUEY_SYNC`` (``normal``: Fleet's SQLite setting, WAL + NORMAL; ``full``: Huey's
default when ``fsync`` is not given, SQLite's FULL), and one no-op task.

    python -c 'import huey_app; huey_app.enqueue(N)'   # N x noop(i) one by one
    huey_consumer huey_app.huey -w 10 -k thread   # the worker (PYTHONPATH=bench)
"""

from __future__ import annotations

import json
import os
import time

from huey import Huey
from huey.storage import SqliteStorage

SYNC = os.environ.get("HUEY_SYNC", "normal")


class Storage(SqliteStorage):
    """SqliteStorage whose connections use ``synchronous`` = ``$HUEY_SYNC``."""

    def _create_connection(self):  # type: ignore[no-untyped-def]
        conn = super()._create_connection()
        conn.execute(f"pragma synchronous={ {'normal': 1, 'full': 2}[SYNC] }")
        return conn


huey = Huey(
    "bench",
    storage_class=Storage,
    filename=os.environ.get("HUEY_FILE", "huey.db"),
    # results on (the default); a task that returns None stores none (store_none=False)
)


@huey.task()
def noop(i: int) -> None:
    """Returns at once, like Fleet's bench job."""


def enqueue(n: int) -> None:
    """``n`` calls of the task, one by one; prints the seconds they took as JSON. (Run
    as ``huey_app``, not as ``__main__``: the consumer knows the task by its module.)"""
    t0 = time.perf_counter()
    for i in range(n):
        noop(i)
    print(json.dumps({"seconds": time.perf_counter() - t0}))
