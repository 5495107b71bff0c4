"""Reading stored records without trusting them: the one place where the text a
backend holds becomes a catalog entry, a worker record or a dead letter.

A stored value can be corrupt (written by hand, by a broken tool, by a disk or a
restore gone wrong). One such value must affect only its own record: every
decoder here returns a clear marker instead of raising, and the master shows
the marker (``docs/operations.md``, "Corrupt records"):

* a catalog entry comes back as ``{"type", "unreadable": why, "raw": text}``
  (:func:`catalog_entry_of`, tested with :func:`entry_unreadable`);
* a worker record comes back with what could be read, the fields that could
  not be read empty and named in :attr:`WorkerRecord.unreadable`
  (:func:`worker_record`);
* a dead letter comes back as an :class:`UnreadableBody`: its id where known,
  why, and the raw text cut to :data:`SHOWN_CHARS`.

Pure functions, no I/O (like :mod:`fleet.core.records`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleet.core.records import TaskBody, WorkerRecord

#: Characters of an unreadable stored text that views show (the rest is cut).
SHOWN_CHARS = 200

#: The id at the start of a body in Fleet's form (``{"id":"..."``), read without JSON.
_HEAD_ID = re.compile(r'^\{"id":"([^"\\]*)"')


class Unreadable(ValueError):
    """A stored value that cannot be read; the message says why."""


def shown_text(raw: object) -> str:
    """A stored value as views show it: text (bytes decoded with replacement
    characters), cut to :data:`SHOWN_CHARS` characters."""
    if isinstance(raw, bytes | bytearray | memoryview):
        text = bytes(raw).decode("utf-8", "replace")
    elif isinstance(raw, str):
        text = raw
    else:
        text = repr(raw)
    if len(text) > SHOWN_CHARS:
        return text[:SHOWN_CHARS] + "…"
    return text


def as_text(raw: object) -> str:
    """A stored text value (``str``, or UTF-8 ``bytes``).

    Raises:
        Unreadable: Bytes that are not UTF-8, or a value of another kind.
    """
    if isinstance(raw, str):
        return raw
    if isinstance(raw, bytes | bytearray | memoryview):
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Unreadable(f"not UTF-8 text (byte {exc.start})") from None
    raise Unreadable(f"a {type(raw).__name__}, not text")


def read_json_object(raw: object) -> dict[str, Any]:
    """Decode a stored JSON object (``str`` or UTF-8 ``bytes``).

    Raises:
        Unreadable: Not UTF-8, not JSON, or JSON but not an object.
    """
    text = as_text(raw)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise Unreadable(f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise Unreadable(f"a JSON {type(value).__name__}, not an object")
    return value


# ------------------------------------------------------------------ catalog
def catalog_entry_of(automation_type: str, raw: object) -> dict[str, Any]:
    """A stored catalog entry, or the marker of one that cannot be read:
    ``{"type", "unreadable": why, "raw": the text cut to SHOWN_CHARS}``."""
    try:
        return read_json_object(raw)
    except Unreadable as exc:
        return {
            "type": automation_type,
            "unreadable": f"the stored catalog entry is {exc}",
            "raw": shown_text(raw),
        }


def entry_unreadable(entry: Mapping[str, Any]) -> str | None:
    """Why a catalog entry could not be read, or None for a readable one."""
    why = entry.get("unreadable")
    return why if isinstance(why, str) else None


# ------------------------------------------------------------------ workers
def _gen(raw: object) -> int:
    """A stored generation: an int, or ASCII digits (Redis, SQLite text).

    Raises:
        Unreadable: Anything else, or a negative number.
    """
    if isinstance(raw, bool):
        raise Unreadable("a boolean, not a generation")
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, float) and raw.is_integer():
        value = int(raw)
    else:
        text = as_text(raw).strip()
        if not text.isdigit():
            raise Unreadable(f"not a generation: {shown_text(text)!r}")
        value = int(text)
    if value < 0:
        raise Unreadable(f"a negative generation: {value}")
    return value


def generation_of(raw: object) -> int:
    """A stored generation of a partial config: 0 when there is none or it cannot
    be read (the next PATCH stores a newer one)."""
    if raw is None:
        return 0
    try:
        return _gen(raw)
    except Unreadable:
        return 0


def _state(raw: object) -> dict[str, str]:
    """A stored state hash: a mapping (Redis, memory) or a JSON object text (SQLite).

    Raises:
        Unreadable: Neither, or keys or values that are not text.
    """
    items = raw if isinstance(raw, Mapping) else read_json_object(raw)
    out: dict[str, str] = {}
    for key, value in items.items():
        if value is None:
            continue
        if isinstance(value, str | bytes | bytearray):
            out[as_text(key)] = as_text(value)
        else:  # a number written into a JSON state by hand
            out[as_text(key)] = json.dumps(value)
    return out


def worker_record(
    automation_type: str,
    worker_id: str,
    *,
    hardware: object = None,
    config: object = None,
    gen: object = None,
    state: object = None,
    stats: object = None,
) -> WorkerRecord:
    """A worker record from the values as stored (``None`` where a part is absent):
    JSON object texts for ``hardware``, ``config`` and ``stats``, an int or ASCII
    digits for ``gen``, a mapping or a JSON object text for ``state``.

    Never raises: a part that cannot be read comes back empty (``{}``, ``None``
    or ``0``) and is named in ``unreadable``.
    """
    bad: list[str] = []

    def part(name: str, raw: object) -> dict[str, Any] | None:
        if raw is None or raw == "" or raw == b"":
            return None
        try:
            return read_json_object(raw)
        except Unreadable:
            bad.append(name)
            return None

    read_hardware = part("hardware", hardware)
    read_config = part("config", config)
    read_gen = 0
    if gen is not None and gen != "" and gen != b"":
        try:
            read_gen = _gen(gen)
        except Unreadable:
            bad.append("gen")
    read_state: dict[str, str] = {}
    if state is not None:
        try:
            read_state = _state(state)
        except Unreadable:
            bad.append("state")
    read_stats = part("stats", stats)
    return WorkerRecord(
        automation_type=automation_type,
        worker_id=worker_id,
        hardware=read_hardware or {},
        config=read_config,
        gen=read_gen,
        state=read_state,
        stats=read_stats,
        unreadable=tuple(bad),
    )


def desired_config(config: object, gen: object) -> tuple[dict[str, Any] | None, int]:
    """A worker's stored desired config and generation, as
    :meth:`~fleet.core.capabilities.Configs.desired` answers them:
    ``(None, 0)`` when there is none, and also when either cannot be read (so the
    worker writes its own back, as after a data loss)."""
    if config is None or config == "" or config == b"":
        return None, 0
    try:
        return read_json_object(config), (0 if gen is None else _gen(gen))
    except Unreadable:
        return None, 0


def config_of(raw: object) -> dict[str, Any]:
    """A stored partial config (type-wide or override); ``{}`` when there is none
    or it cannot be read (the next write of it replaces it)."""
    if raw is None:
        return {}
    try:
        return read_json_object(raw)
    except Unreadable:
        return {}


# ------------------------------------------------------------------ dead letters
@dataclass(frozen=True, slots=True)
class UnreadableBody(TaskBody):
    """A stored task body (a dead letter) that cannot be read. Never stored: the
    DLQ still holds the original text; this is what ``dead_peek`` shows of it.

    Attributes:
        unreadable: Why it cannot be read.
        raw: The stored text, cut to :data:`SHOWN_CHARS` characters.
    """

    unreadable: str = ""
    raw: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = TaskBody.to_dict(self)
        out["unreadable"] = self.unreadable
        out["raw"] = self.raw
        return out


def unreadable_body(task_id: str | None, raw: object, why: str) -> UnreadableBody:
    """The marker of a dead letter whose stored text cannot be read: its id where
    known (else the id at the head of the text, else ``""``)."""
    if not task_id:
        found = _HEAD_ID.match(raw) if isinstance(raw, str) else None
        task_id = found.group(1) if found else ""
    return UnreadableBody(
        id=task_id,
        payload=None,
        last_error=f"the stored body could not be read: {why}",
        unreadable=why,
        raw=shown_text(raw),
    )


def read_body(raw: object) -> TaskBody:
    """Decode a stored task body.

    Raises:
        Unreadable: Not UTF-8, not a JSON object, or not a task body.
    """
    d = read_json_object(raw)
    try:
        return TaskBody.from_dict(d)
    except (KeyError, TypeError, ValueError) as exc:
        raise Unreadable(f"not a task body ({type(exc).__name__}: {exc})") from None


def dead_body(task_id: str | None, raw: object) -> TaskBody:
    """A stored dead letter, or its :class:`UnreadableBody` marker."""
    try:
        return read_body(raw)
    except Unreadable as exc:
        return unreadable_body(task_id, raw, str(exc))
