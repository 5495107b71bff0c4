"""The JSON an error group's sample, domains and snapshot description are stored as,
read and written alike by the SQLite and Redis backends.

Its own module so that the Redis backend reads them without importing the SQLite
backend (a worker on Redis starts ~10 ms sooner).
"""

from __future__ import annotations

import json
from typing import Any

from fleet.core.error_groups import Sample, SnapshotMeta


def sample_doc(sample: Sample) -> str:
    """A sample as stored (JSON)."""
    return json.dumps(
        {"task_id": sample.task_id, "message": sample.message, "tb": sample.traceback}
    )


def sample_of(raw: Any) -> Sample:
    """A stored sample (anything unreadable: an empty one)."""
    try:
        doc = json.loads(raw)
    except (TypeError, ValueError):
        return Sample()
    if not isinstance(doc, dict):
        return Sample()
    return Sample(str(doc.get("task_id", "")), str(doc.get("message", "")), str(doc.get("tb", "")))


def domains_of(raw: Any) -> tuple[str, ...]:
    try:
        doc = json.loads(raw)
    except (TypeError, ValueError):
        return ()
    return tuple(str(d) for d in doc) if isinstance(doc, list) else ()


def meta_doc(meta: SnapshotMeta) -> str:
    """A snapshot's description as stored (JSON; its id and time are columns)."""
    return json.dumps(
        {
            "label": meta.label,
            "task_id": meta.task_id,
            "url": meta.url,
            "html_bytes": meta.html_bytes,
            "truncated": meta.truncated,
            "png_bytes": meta.png_bytes,
        }
    )


def meta_of(snapshot_id: str, taken_at: float, raw: Any) -> SnapshotMeta:
    """A stored description (fields that cannot be read: their defaults)."""
    try:
        doc = json.loads(raw)
    except (TypeError, ValueError):
        doc = {}
    if not isinstance(doc, dict):
        doc = {}

    def num(name: str) -> int:
        value = doc.get(name, 0)
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0

    return SnapshotMeta(
        snapshot_id,
        float(taken_at),
        label=str(doc.get("label", "")),
        task_id=str(doc.get("task_id", "")),
        url=str(doc.get("url", "")),
        html_bytes=num("html_bytes"),
        truncated=bool(doc.get("truncated", False)),
        png_bytes=num("png_bytes"),
    )
