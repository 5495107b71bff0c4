"""Lua scripts of the Redis backend: loaded once, called by EVALSHA.

Scripts live in ``fleet/backends/redis/lua/*.lua`` (package data). A first line
``-- @include <name> [<name> ...]`` prepends those files (shared helpers, in
order), so each script is still one self-contained EVAL body. A server that lost its script cache
(restart, ``SCRIPT FLUSH``, failover) answers NOSCRIPT; the script is then
loaded again and the call retried once.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import re
from collections.abc import Sequence
from importlib import resources
from typing import Any

from fleet.backends.redis.resp import Lane, ReplyError
from fleet.core.results import result_max_per_type, result_ttl
from fleet.core.runs import run_idle_ttl, run_ttl

_INCLUDE = "-- @include "


def _read(name: str) -> str:
    return resources.files("fleet.backends.redis").joinpath("lua", f"{name}.lua").read_text("utf-8")


def _parts(name: str) -> tuple[list[str], str]:
    """The texts of a script's includes, in order, and its own text."""
    text = _read(name)
    first, _, _rest = text.partition("\n")
    if first.startswith(_INCLUDE):
        return [_read(inc) for inc in first[len(_INCLUDE) :].split()], text
    return [], text


def load_source(name: str) -> str:
    """The full source of one script, with its ``@include`` resolved.

    Raises:
        FileNotFoundError: No such script in the package.
    """
    includes, text = _parts(name)
    return "\n".join([*includes, text])


_LOCAL = re.compile(r"^local\s+([A-Za-z_][\w ,]*?)\s*=(.*)$", re.S)
_WORD = re.compile(r"[A-Za-z_]\w*")


def _blocks(text: str) -> list[str]:
    """An include's top-level statements: a ``local function`` up to its ``end`` in
    the first column, any other statement with the indented (or closing-bracket)
    lines that continue it; comments and blank lines as blocks of their own."""
    blocks: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("local function "):
            j = i
            while lines[j] != "end":
                j += 1
            blocks.append("\n".join(lines[i : j + 1]))
            i = j + 1
            continue
        j = i + 1
        if line and not line.startswith("--"):
            while j < len(lines) and lines[j][:1] in (" ", "\t", "}", ")"):
                j += 1
        blocks.append("\n".join(lines[i:j]))
        i = j
    return blocks


def function_library(library: str, includes: Sequence[str], body: str) -> str:
    """A script as a Redis function library ``library`` holding one function of the
    same name (Redis >= 7, called by ``FCALL``).

    Why: ``EVALSHA`` runs a script's whole text at every call, so each call builds
    every helper of its includes again (closures, upvalues, garbage: ~20 µs of a
    push's ~55 µs on Redis 7.0). A library's top level runs once, at ``FUNCTION
    LOAD``. The includes' helpers and constants are kept there; the locals that
    depend on a call (those read from ``KEYS``/``ARGV``, derived from them, computed
    by a call, which the load's sandbox refuses, or lowercase state such as
    ``done_ttl_set``) are declared there and assigned at
    the start of each call by one small bind function per include (one function
    would outgrow Lua's 60 upvalues); the script's own text is the function's body,
    unchanged. The source files stay plain ``EVAL`` scripts (the fallback).

    Raises:
        ValueError: An include's top level holds a statement other than ``local``
            assignments and ``local function`` definitions.
    """
    out = [f"#!lua name={library}", "local KEYS, ARGV"]
    binds: list[str] = []
    per_call: set[str] = set()
    for n, text in enumerate(includes):
        declared: list[str] = []
        kept: list[str] = []
        assigned: list[str] = []
        for block in _blocks(text):
            if not block.strip() or block.startswith(("--", "local function ")):
                kept.append(block)
                continue
            m = _LOCAL.match(block)
            if m is None:
                raise ValueError(f"not a local at an include's top level: {block[:60]!r}")
            names = [x.strip() for x in m.group(1).split(",")]
            words = set(_WORD.findall(m.group(2)))
            # At FUNCTION LOAD a library sees no globals but `redis`: a value that
            # calls anything (tonumber, math.ceil) is computed per call as well.
            if names[0][0].islower() or "(" in m.group(2) or words & ({"KEYS", "ARGV"} | per_call):
                per_call.update(names)
                declared.append(f"local {', '.join(names)}")
                assigned.append(f"  {', '.join(names)} ={m.group(2)}")
            else:
                kept.append(block)
        if assigned:
            out += declared
        out += kept
        if assigned:
            out += [f"local function __bind{n}()", *assigned, "end"]
            binds.append(f"__bind{n}()")
    out.append(f"redis.register_function('{library}', function(keys, args)")
    out.append("KEYS, ARGV = keys, args")
    out += binds
    out += [body, "end)"]
    return "\n".join(out)


def with_settings(source: str) -> str:
    """``source`` with this process' task record settings in place of their
    placeholders (``FLEET_RESULT_TTL_SECONDS``, ``FLEET_RESULT_MAX_PER_TYPE``,
    ``FLEET_RUN_TTL_SECONDS``, ``FLEET_RUN_IDLE_TTL_SECONDS``)."""
    return (
        source.replace("__RESULT_TTL__", repr(result_ttl()))
        .replace("__RESULT_MAX__", str(result_max_per_type()))
        .replace("__RUN_TTL__", repr(run_ttl()))
        .replace("__RUN_IDLE_TTL__", repr(run_idle_ttl()))
    )


class LuaScript:
    """One script: its source and SHA1, callable on a client.

    Args:
        name: File name under ``lua/`` without ``.lua``.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    # The source and its hash are read on first use: a worker calls a handful of
    # the 30 scripts, and building them all cost ~9 ms of every start.
    @functools.cached_property
    def source(self) -> str:
        """The script's ``EVAL`` text, its includes resolved and settings in place."""
        return with_settings(load_source(self.name))

    @functools.cached_property
    def sha(self) -> str:
        """The SHA1 of :attr:`source` (``EVALSHA``)."""
        return hashlib.sha1(self.source.encode("utf-8")).hexdigest()

    @functools.cached_property
    def _as_function(self) -> tuple[str, str]:
        # Built on the first call that needs it, not for all 29 scripts at start.
        includes, body = _parts(self.name)
        code = with_settings(function_library("__LIBRARY__", includes, body))
        name = f"fleet_{self.name}_{hashlib.sha1(code.encode('utf-8')).hexdigest()[:16]}"
        return name, code.replace("__LIBRARY__", name)

    @property
    def function(self) -> str:
        """The function (and its library) name: the code's hash in it, so processes of
        two Fleet versions on one Redis each call their own."""
        return self._as_function[0]

    @property
    def library(self) -> str:
        """The library's source, for ``FUNCTION LOAD``."""
        return self._as_function[1]

    async def __call__(self, client: Lane, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """Run the script: ``FCALL`` of its function where the lane takes functions
        (loading the library first if the server does not have it), else ``EVALSHA``
        (loading the script first if the server lost it).

        Raises:
            ReplyError: Any error reply but a first "function not found" or NOSCRIPT
                (the caller's guard translates it, see
                :func:`fleet.backends.redis.core.translate`).
        """
        if client.functions:
            try:
                return await client.fcall(self.function, keys, args)
            except ReplyError as exc:
                # Recovered here, before any translation, like NOSCRIPT below.
                if not _function_missing(exc):
                    raise
            try:
                await client.execute("FUNCTION", "LOAD", "REPLACE", self.library)
            except ReplyError as exc:
                if not _functions_refused(exc):
                    raise
                client.functions = False  # Redis < 7, or an ACL without FUNCTION: EVALSHA
            else:
                return await client.fcall(self.function, keys, args)
        try:
            return await client.evalsha(self.sha, keys, args)
        except ReplyError as exc:
            # Recovered here, before any translation: a NOSCRIPT must never reach a
            # caller as a BackendError, since one reload answers it.
            if exc.code != "NOSCRIPT":
                raise
            await client.execute("SCRIPT", "LOAD", self.source)
            return await client.evalsha(self.sha, keys, args)


def _function_missing(exc: ReplyError) -> bool:
    """FCALL of a function the server does not have (never loaded, FUNCTION FLUSH,
    a restart without persistence), or of a server without FCALL at all."""
    text = str(exc).lower()
    return "function not found" in text or "unknown command" in text or exc.code == "NOPERM"


def _functions_refused(exc: ReplyError) -> bool:
    """FUNCTION LOAD refused for good: no such command (Redis < 7) or not allowed."""
    return "unknown command" in str(exc).lower() or exc.code == "NOPERM"


SCRIPT_NAMES = (
    "push",
    "reserve",
    "ack",
    "mark_started",
    "nack",
    "release",
    "extend",
    "sweep",
    "cancel",
    "dead",
    "task_state",
    "pool_claim",
    "pool_ops",
    "pool_query",
    "lock_renew",
    "lock_release",
    "next_generation",
    "worker_config_put",
    "config_publish",
    "stream_push",
    "task_progress",
    "stream_read",
    "throttle",
    "groups",
    "limits",
    "schedules",
    "proxies",
    "run_cancel",
    "run_pause",
    "run_unpark",
    "history_record",
)


class Scripts:
    """Every script of the backend, by attribute."""

    def __init__(self) -> None:
        self.all = {name: LuaScript(name) for name in SCRIPT_NAMES}
        self.push = self.all["push"]
        self.reserve = self.all["reserve"]
        self.ack = self.all["ack"]
        self.mark_started = self.all["mark_started"]
        self.nack = self.all["nack"]
        self.release = self.all["release"]
        self.extend = self.all["extend"]
        self.sweep = self.all["sweep"]
        self.cancel = self.all["cancel"]
        self.dead = self.all["dead"]
        self.task_state = self.all["task_state"]
        self.pool_claim = self.all["pool_claim"]
        self.pool_ops = self.all["pool_ops"]
        self.pool_query = self.all["pool_query"]
        self.lock_renew = self.all["lock_renew"]
        self.lock_release = self.all["lock_release"]
        self.next_generation = self.all["next_generation"]
        self.worker_config_put = self.all["worker_config_put"]
        self.config_publish = self.all["config_publish"]
        self.stream_push = self.all["stream_push"]
        self.task_progress = self.all["task_progress"]
        self.stream_read = self.all["stream_read"]
        self.throttle = self.all["throttle"]
        self.groups = self.all["groups"]
        self.limits = self.all["limits"]
        self.schedules = self.all["schedules"]
        self.proxies = self.all["proxies"]
        self.run_cancel = self.all["run_cancel"]
        self.run_pause = self.all["run_pause"]
        self.run_unpark = self.all["run_unpark"]
        self.history_record = self.all["history_record"]

    async def load_all(self, client: Lane) -> None:
        """SCRIPT LOAD every script (pipelined: one round trip) where scripts run by
        EVALSHA. Where they run as functions, nothing: a library is loaded by the
        first call that misses it and then stays on the server, replicated and
        persisted with the data, for every later process (a worker's start pays no
        compile of 29 scripts)."""
        if client.functions:
            return
        await asyncio.gather(
            *(client.execute("SCRIPT", "LOAD", script.source) for script in self.all.values())
        )


_SCRIPTS: Scripts | None = None
_SCRIPTS_SETTINGS: tuple[float, int, float, float] | None = None


def scripts() -> Scripts:
    """The process-wide script set (sources are read from the package once, and
    again if the task record settings they embed changed)."""
    global _SCRIPTS, _SCRIPTS_SETTINGS
    settings = (result_ttl(), result_max_per_type(), run_ttl(), run_idle_ttl())
    if _SCRIPTS is None or settings != _SCRIPTS_SETTINGS:
        _SCRIPTS, _SCRIPTS_SETTINGS = Scripts(), settings
    return _SCRIPTS
