"""``sqlite:///path``: a one-host fleet on a single file, safe across processes.

A master and any number of worker processes on one machine share one SQLite
file in WAL mode. Every operation is one short transaction (``BEGIN
IMMEDIATE`` when it writes), so two processes can never both reserve a task
and a crash between statements loses or duplicates nothing. Statements run in
threads (see :mod:`fleet.backends.sqlite.conn`); blocked reserves and event
subscriptions of other processes are woken by one cheap poller per backend
instance (see :mod:`fleet.backends.sqlite.watch`).

URL forms: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``,
options ``?busy_timeout_ms=5000&poll_ms=20&readers=2``. Parent directories are
created. ``sqlite:///:memory:`` is refused: use ``memory://`` in one process.

Operations notes:

* Keep the file on a local disk: WAL mode shares memory between the processes
  (the ``-shm`` file) and does not work over NFS/SMB. One host only; a fleet of
  machines runs on Redis.
* ``-wal`` and ``-shm`` next to the file belong to it: copy the database with
  ``sqlite3 fleet.db ".backup copy.db"``, not ``cp``, while processes run.
* ``synchronous=NORMAL``: a killed process loses nothing committed; a power
  cut may lose the last few commits but never corrupts the file.
* A blocked reserve or a subscription sees other processes' changes within
  ``poll_ms`` (20 ms by default); while nothing changes a poll is one
  ``PRAGMA data_version`` in a background thread.
"""

from __future__ import annotations

from fleet.backends.base import Backend
from fleet.backends.sqlite import queue_admin as qa
from fleet.backends.sqlite.browse import SQLiteBrowse
from fleet.backends.sqlite.configs import SQLiteConfigs
from fleet.backends.sqlite.conn import SQLiteDB, parse_url
from fleet.backends.sqlite.domains import SQLiteDomains
from fleet.backends.sqlite.errors import SQLiteErrors
from fleet.backends.sqlite.events import SQLiteEvents
from fleet.backends.sqlite.groups import SQLiteGroups
from fleet.backends.sqlite.history import SQLiteHistory
from fleet.backends.sqlite.identities import SQLiteIdentities
from fleet.backends.sqlite.limits import SQLiteLimits
from fleet.backends.sqlite.meters import SQLiteMeters
from fleet.backends.sqlite.pools import SQLitePools
from fleet.backends.sqlite.primitives import SQLiteCounters, SQLiteKV, SQLiteLocks
from fleet.backends.sqlite.proxies import SQLiteProxies
from fleet.backends.sqlite.queues import SQLiteQueues
from fleet.backends.sqlite.runs import SQLiteRuns
from fleet.backends.sqlite.schedules import SQLiteSchedules
from fleet.backends.sqlite.state import SQLiteCatalog, SQLiteWorkers
from fleet.backends.sqlite.streams import SQLiteStreams
from fleet.backends.sqlite.watch import Watcher
from fleet.backends.sqlite.webhooks import SQLiteWebhooks


class SQLiteBackend(Backend):
    """The SQLite backend (see the module docstring).

    Args:
        url: ``sqlite:///path/to/fleet.db`` (+ options).

    Raises:
        ConfigError: The URL is malformed or names an in-memory database.
    """

    queues: SQLiteQueues

    def __init__(self, url: str, db: SQLiteDB | None = None) -> None:
        self.url = url
        # ``db``: the engine of another home for the same tables (memory://).
        db = self._db = SQLiteDB(parse_url(url)) if db is None else db
        watcher = self._watcher = Watcher(db, db.options.poll_ms / 1000)
        self.queues = SQLiteQueues(db, watcher)
        self.groups = SQLiteGroups(db, watcher)
        self.streams = SQLiteStreams(db, watcher)
        self.pools = SQLitePools(db)
        self.kv = SQLiteKV(db)
        self.locks = SQLiteLocks(db)
        self.counters = SQLiteCounters(db)
        self.events = SQLiteEvents(db, watcher)
        self.catalog = SQLiteCatalog(db)
        self.workers = SQLiteWorkers(db)
        self.configs = SQLiteConfigs(db)
        self.schedules = SQLiteSchedules(db)
        self.runs = SQLiteRuns(db, watcher, qa.run_cancel, qa.run_resume)
        self.browse = SQLiteBrowse(db, watcher.wake)
        self.limits = SQLiteLimits(db)
        self.history = SQLiteHistory(db)
        self.identities = SQLiteIdentities(db)
        self.domains = SQLiteDomains(db)
        self.meters = SQLiteMeters(db, watcher.kick)
        self.errors = SQLiteErrors(db)
        self.proxies = SQLiteProxies(db)
        self.proxies.salts = self.kv
        self.webhooks = SQLiteWebhooks(db)
        self._connected = False
        self._closed = False

    @property
    def watcher_polls(self) -> int:
        """How many cross-process polls this instance made (for idle-cost checks)."""
        return self._watcher.polls

    @property
    def write_ops(self) -> int:
        """How many write operations this instance submitted (for idle-cost checks)."""
        return self._db.write_ops

    async def connect(self) -> None:
        if self._connected:
            return
        await self._db.open()
        self._connected = True

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.queues.close()
        await self._watcher.close()
        await self._db.close()

    async def ping(self) -> bool:
        try:
            return bool(await self._db.read(lambda c: c.execute("SELECT 1").fetchone()[0] == 1))
        except Exception:
            return False

    async def purge_type(self, automation_type: str) -> None:
        await self._db.write(lambda c: qa.purge_type(c, automation_type))
