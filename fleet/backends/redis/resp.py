"""A small pipelined RESP2 client: the Redis backend's lane for scripts.

Every state change of the Redis backend is one ``EVALSHA``. Through
redis-py's asyncio client each such call costs 50-80 µs of Python (pool
checkout, command packing through its encoder, a ``wait_for`` per read);
this client costs about 15 µs for the same round trip, which is what lets a
producer submit one task at a time faster than the peers and a worker drain
more tasks per CPU second.

The design is the plain one: one connection, many callers. A call writes
its command and waits on a future; replies arrive in order, so each reply
resolves the oldest waiting future. Replies are parsed by hiredis' C reader
(a dependency through ``redis[hiredis]``). Blocking commands never go here
(they would hold up everyone behind them): BLPOP stays on redis-py's
blocking pool.

Failure model (what a call raises; the guard of
:mod:`fleet.backends.redis.core` turns each into ``BackendUnavailable`` or
``BackendError``, for this client and redis-py alike, in one place):

* an error reply fails only its own call, with :class:`ReplyError` (its
  :attr:`~ReplyError.code` is the reply's first word: ``ERR``, ``NOSCRIPT``,
  ``BUSY``...). ``READONLY`` and ``MASTERDOWN`` also *retire* the connection:
  the server behind it is not (or no longer, after a failover) a writable
  primary, so the next call opens a new connection (which reaches the new
  primary when the address is a name or proxy that follows failovers), while
  the calls already written on the old one still get their replies;
* a reply whose content cannot be decoded (a string that is not UTF-8) fails
  only its own call, with ``UnicodeDecodeError``: hiredis reads such a reply
  to its end before it raises, so the stream is still in step;
* a reply that cannot be parsed (``hiredis.ProtocolError``), or a reply
  nobody asked for: the stream is out of step and no later reply can be
  matched to its caller, so the connection is dropped (as below);
* the connection drops: every waiting call fails with ``ConnectionError``
  and the next call opens a new connection;
* the server stops answering: when the oldest waiting call is older than
  the command timeout, the connection is aborted (same as above);
* the server reads slower than callers write: while the transport's write
  buffer is above its high-water mark, new calls wait before they write
  (asyncio's flow control), so a stalled server costs bounded memory. If the
  connection is dropped meanwhile they fail with ``ConnectionError`` like the
  calls written on it (nothing of theirs was sent, so a retry is safe); if it
  is retired they go to a new connection.

The URL grammar is redis-py's (:func:`redis.connection.parse_url`), so both
clients of a backend read one URL the same way. ``redis+sentinel://`` asks the
sentinels for the primary at each connect (:mod:`fleet.backends.redis.sentinel`).
URLs for Redis Cluster are refused (:class:`~fleet.core.errors.UnsupportedBackend`):
this client keeps one connection to one server.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Sequence
from typing import Any, Protocol

import hiredis
from redis.exceptions import ResponseError

from fleet.backends.redis.endpoint import Endpoint, endpoint_from_url, refuse_unservable

__all__ = ["Endpoint", "Lane", "ReplyError", "RespClient", "endpoint_from_url", "refuse_unservable"]

#: Error replies after which a connection is retired (see the module docstring):
#: the server it reaches does not take writes as a primary would, and a new
#: connection may reach the one that does.
_RETIRE_CODES = frozenset({"READONLY", "MASTERDOWN"})


class Lane(Protocol):
    """What the backend calls scripts and commands on: :class:`RespClient` for one
    server, :class:`~fleet.backends.redis.cluster.ClusterLane` for a cluster."""

    async def execute(self, *args: Any) -> Any: ...

    #: Whether scripts run as Redis functions (``FCALL``) on this lane; set False
    #: by the scripts once its server refuses them (then ``EVALSHA``).
    functions: bool

    async def evalsha(self, sha: str, keys: Sequence[str], args: Sequence[Any]) -> Any: ...

    async def fcall(self, function: str, keys: Sequence[str], args: Sequence[Any]) -> Any: ...

    async def close(self) -> None: ...


class ReplyError(ResponseError):
    """An error reply from the server (``-ERR ...``, ``NOSCRIPT ...``)."""

    @property
    def code(self) -> str:
        """The reply's first word: ``ERR``, ``NOSCRIPT``, ``BUSY``, ``READONLY``...

        Computed when asked (only on the error path), not when hiredis builds
        the error.
        """
        return str(self).split(" ", 1)[0]


def _raw(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bool) or value is None:
        # as redis-py: neither has one obvious wire form
        raise TypeError(f"invalid redis argument {value!r}: encode it as a string first")
    if isinstance(value, int):
        return b"%d" % value
    if isinstance(value, float):
        return repr(value).encode()
    raise TypeError(f"invalid redis argument of type {type(value).__name__}")


def _bulk(value: Any) -> bytes:
    """One argument as a RESP bulk string."""
    raw = _raw(value)
    return b"$%d\r\n%s\r\n" % (len(raw), raw)


def pack(args: tuple[Any, ...]) -> bytes:
    """One command in RESP: an array of bulk strings."""
    return b"*%d\r\n" % len(args) + b"".join(map(_bulk, args))


#: Encoded bulk strings of names used again and again (script SHAs, key names).
_NAMES: dict[str, bytes] = {}
_NAMES_MAX = 4096


def _name(value: str) -> bytes:
    chunk = _NAMES.get(value)
    if chunk is None:
        chunk = _bulk(value)
        if len(_NAMES) >= _NAMES_MAX:  # keys with ids in them must not grow it forever
            _NAMES.clear()
        _NAMES[value] = chunk
    return chunk


def pack_evalsha(
    sha: str, keys: Sequence[str], args: Sequence[Any], command: bytes = b"$7\r\nEVALSHA\r\n"
) -> bytes:
    """``EVALSHA sha numkeys *keys *args`` in RESP (``command``: another command of
    the same shape, such as FCALL), with the SHA and key names encoded once per
    process rather than once per call."""
    out = [b"*%d\r\n%s" % (3 + len(keys) + len(args), command), _name(sha)]
    out.append(_name(str(len(keys))))
    out.extend(map(_name, keys))
    out.extend(map(_bulk, args))
    return b"".join(out)


_FCALL = b"$5\r\nFCALL\r\n"


class _Connection(asyncio.Protocol):
    """One socket; futures wait for replies in the order commands were written."""

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float | None) -> None:
        self.loop = loop
        self.timeout = timeout
        self.transport: asyncio.Transport | None = None
        #: False once the connection takes no new calls (lost, closing or retired).
        self.alive = False
        #: ``alive`` and not paused by flow control: the one flag the hot path
        #: reads before it writes.
        self.ready = False
        #: Set while waiting for this connection to take writes is pointless:
        #: it is not paused, or it is no longer alive.
        self.writable = asyncio.Event()
        self.writable.set()
        #: True once retired: it ends when its last written call has its reply.
        self.retiring = False
        #: Why the connection ended, once it has.
        self.ended: BaseException | None = None
        self._reader = hiredis.Reader(encoding="utf-8", replyError=ReplyError)
        self._waiting: collections.deque[tuple[asyncio.Future[Any], float]] = collections.deque()
        self._watchdog: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        self.alive = self.ready = True

    def data_received(self, data: bytes) -> None:
        reader = self._reader
        reader.feed(data)
        waiting = self._waiting
        while True:
            try:
                reply = reader.gets()
            except UnicodeDecodeError as exc:
                # A string in the reply is not UTF-8. hiredis keeps the first decode
                # error of a reply and raises it only once the whole reply is read, so
                # the reader stands at the start of the next reply: the stream is in
                # step and only this reply's caller fails (a retry would fail the same
                # way; the guard makes it a BackendError).
                if not waiting:
                    self.abort(ConnectionError("redis sent a reply nobody asked for"))
                    return
                future, _ = waiting.popleft()
                if not future.done():
                    future.set_exception(exc)
                continue
            except Exception as exc:
                # hiredis.ProtocolError (or anything else): the reader cannot frame the
                # stream any more (it stays in its error state), so no later reply can
                # be matched to its caller. Only dropping the connection is safe; the
                # waiting calls fail as on a lost connection and the next call
                # reconnects.
                self.abort(ConnectionError(f"unreadable reply from redis: {exc}"))
                return
            if reply is False:
                if self.retiring and not waiting:
                    self._close()
                return
            if not waiting:
                self.abort(ConnectionError("redis sent a reply nobody asked for"))
                return
            future, _ = waiting.popleft()
            if isinstance(reply, ReplyError):
                self._error_reply(future, reply)
            elif not future.done():  # done: its caller was cancelled; the reply is dropped
                future.set_result(reply)

    def _error_reply(self, future: asyncio.Future[Any], reply: ReplyError) -> None:
        if not future.done():
            future.set_exception(reply)
        if reply.code in _RETIRE_CODES:
            self.retire()

    def eof_received(self) -> bool:
        # the server closed its side: nothing more will be answered here
        self._stop_taking_calls()
        return False  # close our side too; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(ConnectionError(f"connection to redis lost: {exc or 'closed by server'}"))

    def pause_writing(self) -> None:
        # The transport holds more unsent bytes than its high-water mark: the server
        # (or the network) is slower than the callers. New calls wait for
        # resume_writing in RespClient._ready rather than grow the buffer without
        # bound; calls already written are unaffected.
        if self.alive:  # else nobody may wait on it: `writable` stays set
            self.ready = False
            self.writable.clear()

    def resume_writing(self) -> None:
        self.ready = self.alive
        self.writable.set()

    # -- calls
    def send(self, data: bytes) -> asyncio.Future[Any]:
        """Write one or more commands; the future resolves with the first reply.

        Raises:
            ConnectionError: The connection is closed.
        """
        if not self.alive or self.transport is None or self.transport.is_closing():
            raise ConnectionError("connection to redis is closed")
        future = self.loop.create_future()
        if not self._waiting and self.timeout is not None and self._watchdog is None:
            self._watchdog = self.loop.call_later(self.timeout, self._check_overdue)
        self._waiting.append((future, self.loop.time()))
        self.transport.write(data)
        return future

    def _check_overdue(self) -> None:
        self._watchdog = None
        if not self._waiting or self.timeout is None:
            return
        oldest = self._waiting[0][1]
        due = oldest + self.timeout
        if self.loop.time() >= due:
            self.abort(TimeoutError(f"redis did not answer within {self.timeout:g} s"))
        else:
            self._watchdog = self.loop.call_at(due, self._check_overdue)

    def retire(self) -> None:
        """Take no new calls; close once every call written has its reply."""
        self._stop_taking_calls()
        self.retiring = True
        if not self._waiting:
            self._close()

    def abort(self, exc: BaseException) -> None:
        """Drop the connection; every waiting call fails with ``exc``."""
        self._fail(exc)
        if self.transport is not None:
            self.transport.abort()

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def _stop_taking_calls(self) -> None:
        self.alive = self.ready = False
        self.writable.set()  # wake callers waiting for a drain: RespClient._ready decides

    def _fail(self, exc: BaseException) -> None:
        if self.ended is None:
            self.ended = exc
        self._stop_taking_calls()
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        waiting, self._waiting = self._waiting, collections.deque()
        for future, _ in waiting:
            if not future.done():
                future.set_exception(exc)
                # a caller that already gave up must not leave "exception never retrieved"
                future.exception()


class RespClient:
    """A lazily connected, pipelined client over one connection.

    Args:
        endpoint: Where to connect (see :func:`endpoint_from_url`).
    """

    #: Scripts run as functions (FCALL) here, Redis >= 7 (see scripts.LuaScript).
    functions = True

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._conn: _Connection | None = None
        self._opening: asyncio.Future[_Connection] | None = None

    async def execute(self, *args: Any) -> Any:
        """Send one command and return its reply (strings decoded as UTF-8).

        Raises:
            ReplyError: The server answered with an error.
            UnicodeDecodeError: The reply holds a string that is not UTF-8
                (only this call fails; the connection stays up).
            ConnectionError: The connection failed or was lost (OSError).
            TimeoutError: The server did not answer in time (OSError).
        """
        conn = self._conn
        if conn is None or not conn.ready or conn.loop is not asyncio.get_running_loop():
            conn = await self._ready()
        return await conn.send(pack(args))

    async def evalsha(self, sha: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """``EVALSHA`` (see :meth:`execute`; NOSCRIPT comes back as :class:`ReplyError`)."""
        conn = self._conn
        if conn is None or not conn.ready or conn.loop is not asyncio.get_running_loop():
            conn = await self._ready()
        return await conn.send(pack_evalsha(sha, keys, args))

    async def fcall(self, function: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """``FCALL`` (see :meth:`execute`; an unknown function comes back as
        :class:`ReplyError`)."""
        conn = self._conn
        if conn is None or not conn.ready or conn.loop is not asyncio.get_running_loop():
            conn = await self._ready()
        return await conn.send(pack_evalsha(function, keys, args, _FCALL))

    async def _ready(self) -> _Connection:
        """The connection (opened if needed) once it takes writes: while flow
        control pauses it, wait for the transport to drain."""
        while True:
            conn = await self._connection()
            if conn.ready:
                return conn
            # Paused: wait for the transport to drain below its low-water mark.
            await conn.writable.wait()
            if not conn.alive and not conn.retiring:
                # Dropped meanwhile (stalled, lost, closed): fail as the calls written
                # on it did, rather than reconnect behind the back of close() or of a
                # stalled server. Nothing of this call was written.
                why = f": {conn.ended}" if conn.ended is not None else ""
                raise ConnectionError(f"connection to redis lost before the call was sent{why}")
            # retired (READONLY, MASTERDOWN) or drained: the next turn takes a connection

    async def _connection(self) -> _Connection:
        loop = asyncio.get_running_loop()
        conn = self._conn
        if conn is not None and conn.alive and conn.loop is loop:
            return conn
        if conn is not None and conn.loop is not loop:
            # a connection belongs to the loop that opened it (tests run one loop each)
            try:
                conn.abort(ConnectionError("event loop changed"))
            except RuntimeError:  # that loop is already closed
                pass
            self._conn = None
        # one connect at a time; concurrent callers wait for the same one
        if self._opening is None or self._opening.get_loop() is not loop:
            self._opening = asyncio.ensure_future(self._open())
        opening = self._opening
        try:
            self._conn = await asyncio.shield(opening)
        finally:
            if opening.done() and self._opening is opening:
                self._opening = None
        return self._conn

    async def _open(self) -> _Connection:
        ep = self.endpoint
        loop = asyncio.get_running_loop()

        def factory() -> _Connection:
            return _Connection(loop, ep.command_timeout)

        host, port = (ep.host, ep.port) if ep.locate is None else await ep.locate()
        async with asyncio.timeout(ep.connect_timeout):
            if ep.path is not None:
                _, conn = await loop.create_unix_connection(factory, ep.path, ssl=ep.tls)
            else:
                _, conn = await loop.create_connection(
                    factory, host, port, ssl=ep.tls, server_hostname=ep.server_hostname
                )
            try:
                await self._handshake(conn)
            except BaseException:
                conn.abort(ConnectionError("handshake failed"))
                raise
        return conn

    async def _handshake(self, conn: _Connection) -> None:
        ep = self.endpoint
        commands: list[tuple[Any, ...]] = []
        if ep.password is not None:
            auth = ("AUTH", ep.username, ep.password) if ep.username else ("AUTH", ep.password)
            commands.append(auth)
        if ep.db:
            commands.append(("SELECT", ep.db))
        if ep.client_name:
            commands.append(("CLIENT", "SETNAME", ep.client_name))
        if ep.locate is not None:  # after a failover a sentinel may name the old primary
            commands.append(("ROLE",))
        futures = [conn.send(pack(cmd)) for cmd in commands]
        for cmd, future in zip(commands, futures, strict=True):
            try:
                await future
            except ReplyError as exc:
                for other in futures:  # their errors (NOAUTH after a failed AUTH) go unread
                    if other.done() and not other.cancelled():
                        other.exception()
                # a refused AUTH/SELECT means this server cannot be used: a connection error
                raise ConnectionError(f"redis refused {cmd[0]}: {exc}") from exc
        role = futures[-1].result() if ep.locate is not None else ["master"]
        if not (isinstance(role, list) and role and role[0] == "master"):
            raise ConnectionError(f"the server the sentinels named is not a primary: {role!r}")

    async def close(self) -> None:
        """Close the connection; calls still waiting fail with ``ConnectionError``."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.abort(ConnectionError("client closed"))
            except RuntimeError:  # its loop is already closed: so is the socket's use
                pass
        if self._opening is not None:
            self._opening.cancel()
            self._opening = None
