"""One pool of the memory backend: items, claims and the indexes that keep claim flat.

Pure and synchronous (see ``memory_queue``). Claims must not cost O(pool size),
so available items are indexed per *where signature*: the first claim filtered
on a set of tag fields builds an index of buckets keyed by those fields' values
(one O(N) pass, once); from then on every put/claim/release keeps it current at
O(log N). Each bucket holds two heaps (latest expiry first, earliest expiry
first) whose entries are validated lazily against the item's version, so a claim
or an upsert never has to dig an entry out of the middle of a heap.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import random
from dataclasses import dataclass, field
from typing import Any

from fleet.core.records import PoolClaim, PoolItem, PoolStats, PoolStrategy, dumps, new_id

#: Items expiring within this many seconds count as ``expiring_soon``.
EXPIRING_SOON_SECONDS = 60.0

_Entry = tuple[float, int, int, str]  # (sort key, tie-break, version, item id)


def canonical(value: Any) -> str:
    """The JSON text two equal tag values share (``1`` and ``True`` stay apart)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(slots=True)
class _Item:
    id: str
    payload_json: str
    tags: dict[str, Any]
    tag_keys: dict[str, str]
    expires_at: float | None
    created_at: float
    seq: int
    ver: int = 0
    token: str | None = None
    until: float = 0.0

    def record(self) -> PoolItem:
        return PoolItem(
            id=self.id,
            payload=json.loads(self.payload_json),
            tags=json.loads(dumps(self.tags)),
            expires_at=self.expires_at,
            created_at=self.created_at,
        )


@dataclass(slots=True)
class _Bucket:
    fresh: list[_Entry] = field(default_factory=list)  # latest expiry first
    old: list[_Entry] = field(default_factory=list)  # earliest expiry first
    count: int = 0  # available items in the bucket


class PoolState:
    """Items, claims and indexes of one pool."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.items: dict[str, _Item] = {}
        self._seq = itertools.count()
        self._ver = itertools.count(1)
        # fields (sorted) -> values (canonical JSON, same order) -> bucket
        self.indexes: dict[tuple[str, ...], dict[tuple[str, ...], _Bucket]] = {(): {(): _Bucket()}}
        self._expiry: list[tuple[float, str]] = []
        self._leases: list[tuple[float, str, str]] = []
        self._random = random.Random()

    # ------------------------------------------------------------ indexes
    def _buckets(self, item: _Item) -> list[_Bucket]:
        out: list[_Bucket] = []
        for fields, buckets in self.indexes.items():
            if all(f in item.tag_keys for f in fields):
                key = tuple(item.tag_keys[f] for f in fields)
                bucket = buckets.get(key)
                if bucket is None:
                    bucket = buckets[key] = _Bucket()
                out.append(bucket)
        return out

    def _add_to(self, bucket: _Bucket, item: _Item) -> None:
        exp = math.inf if item.expires_at is None else item.expires_at
        heapq.heappush(bucket.fresh, (-exp, -item.seq, item.ver, item.id))
        heapq.heappush(bucket.old, (exp, item.seq, item.ver, item.id))
        bucket.count += 1

    def _index(self, item: _Item) -> None:
        """Make an unclaimed item findable (new version: older entries go stale)."""
        item.ver = next(self._ver)
        for bucket in self._buckets(item):
            self._add_to(bucket, item)

    def _unindex(self, item: _Item) -> None:
        """Hide an available item from claims (its entries go stale)."""
        for bucket in self._buckets(item):
            bucket.count -= 1
            if max(len(bucket.fresh), len(bucket.old)) > 2 * bucket.count + 64:
                self._compact(bucket)
        item.ver = next(self._ver)

    def _valid(self, entry: _Entry) -> _Item | None:
        item = self.items.get(entry[3])
        if item is None or item.ver != entry[2] or item.token is not None:
            return None
        return item

    def _compact(self, bucket: _Bucket) -> None:
        bucket.fresh = [e for e in bucket.fresh if self._valid(e) is not None]
        bucket.old = [e for e in bucket.old if self._valid(e) is not None]
        heapq.heapify(bucket.fresh)
        heapq.heapify(bucket.old)

    def _bucket_for(self, where: dict[str, Any] | None) -> _Bucket | None:
        fields = tuple(sorted(where or {}))
        buckets = self.indexes.get(fields)
        if buckets is None:
            # First query on this signature: index every available item once.
            buckets = self.indexes[fields] = {}
            for item in self.items.values():
                if item.token is None and all(f in item.tag_keys for f in fields):
                    key = tuple(item.tag_keys[f] for f in fields)
                    self._add_to(buckets.setdefault(key, _Bucket()), item)
        key = tuple(canonical(where[f]) for f in fields) if where else ()
        return buckets.get(key)

    # ------------------------------------------------------------ upkeep
    def maintain(self, now: float) -> int:
        """Drop expired items and end run-out claims; returns items dropped."""
        while self._leases and self._leases[0][0] <= now:
            until, item_id, token = heapq.heappop(self._leases)
            item = self.items.get(item_id)
            if item is not None and item.token == token and item.until == until:
                item.token = None
                self._index(item)
        dropped = 0
        while self._expiry and self._expiry[0][0] <= now:
            exp, item_id = heapq.heappop(self._expiry)
            item = self.items.get(item_id)
            if item is not None and item.expires_at == exp:
                self._drop(item)
                dropped += 1
        return dropped

    def _drop(self, item: _Item) -> None:
        if item.token is None:
            self._unindex(item)
        del self.items[item.id]

    def _held(self, item_id: str, token: str, now: float) -> _Item | None:
        self.maintain(now)
        item = self.items.get(item_id)
        if item is None or item.token != token or item.until <= now:
            return None
        return item

    # ------------------------------------------------------------ operations
    def put(
        self,
        payload: Any,
        tags: dict[str, Any],
        *,
        ttl_seconds: float | None,
        item_id: str | None,
        now: float,
    ) -> str:
        self.maintain(now)
        expires_at = None if ttl_seconds is None else now + ttl_seconds
        tags_copy: dict[str, Any] = json.loads(dumps(tags))
        tag_keys = {k: canonical(v) for k, v in tags_copy.items()}
        item = self.items.get(item_id) if item_id is not None else None
        if item is None:
            item = _Item(
                id=item_id or new_id(),
                payload_json=dumps(payload),
                tags=tags_copy,
                tag_keys=tag_keys,
                expires_at=expires_at,
                created_at=now,
                seq=next(self._seq),
            )
            self.items[item.id] = item
            self._index(item)
        else:
            claimed = item.token is not None
            if not claimed:
                self._unindex(item)
            item.payload_json = dumps(payload)
            item.tags, item.tag_keys, item.expires_at = tags_copy, tag_keys, expires_at
            item.seq = next(self._seq)
            if not claimed:
                self._index(item)
        if expires_at is not None:
            heapq.heappush(self._expiry, (expires_at, item.id))
        return item.id

    def claim(
        self,
        where: dict[str, Any] | None,
        hold_seconds: float,
        strategy: PoolStrategy,
        now: float,
        token: str,
    ) -> PoolClaim | None:
        self.maintain(now)
        bucket = self._bucket_for(where)
        if bucket is None or bucket.count <= 0:
            return None
        item: _Item | None = None
        if strategy == "random":
            for _ in range(8):
                item = self._valid(self._random.choice(bucket.fresh))
                if item is not None:
                    break
        if item is None:
            heap = bucket.old if strategy == "oldest" else bucket.fresh
            while heap and item is None:
                item = self._valid(heapq.heappop(heap))
        if item is None:
            return None
        self._unindex(item)
        item.token, item.until = token, now + hold_seconds
        heapq.heappush(self._leases, (item.until, item.id, token))
        return PoolClaim(item=item.record(), token=token, lease_until=item.until)

    def release(self, item_id: str, token: str, now: float) -> bool:
        item = self._held(item_id, token, now)
        if item is None:
            return False
        item.token = None
        self._index(item)
        return True

    def evict(self, item_id: str, token: str, now: float) -> bool:
        item = self._held(item_id, token, now)
        if item is None:
            return False
        self._drop(item)
        return True

    def extend(self, item_id: str, token: str, hold_seconds: float, now: float) -> bool:
        item = self._held(item_id, token, now)
        if item is None:
            return False
        item.until = now + hold_seconds
        heapq.heappush(self._leases, (item.until, item.id, token))
        return True

    def available(self, where: dict[str, Any] | None, n: int, now: float) -> list[PoolItem]:
        """Up to ``n`` unclaimed, unexpired items, freshest first (O(n log N))."""
        self.maintain(now)
        bucket = self._bucket_for(where)
        if bucket is None:
            return []
        taken: list[_Entry] = []
        out: list[PoolItem] = []
        while bucket.fresh and len(out) < n:
            entry = heapq.heappop(bucket.fresh)
            item = self._valid(entry)
            if item is not None:
                taken.append(entry)
                out.append(item.record())
        for entry in taken:
            heapq.heappush(bucket.fresh, entry)
        return out

    def size(self, where: dict[str, Any] | None, now: float) -> int:
        self.maintain(now)
        bucket = self._bucket_for(where)
        return 0 if bucket is None else bucket.count

    def remove(self, item_id: str, now: float) -> bool:
        self.maintain(now)
        item = self.items.get(item_id)
        if item is None:
            return False
        self._drop(item)
        return True

    def stats(self, now: float) -> PoolStats:
        # Not a hot path: counting expiring_soon visits every item.
        self.maintain(now)
        total = len(self.items)
        available = self.indexes[()][()].count
        soon = sum(
            1
            for item in self.items.values()
            if item.expires_at is not None and item.expires_at <= now + EXPIRING_SOON_SECONDS
        )
        return PoolStats(
            name=self.name,
            total=total,
            available=available,
            claimed=total - available,
            expiring_soon=soon,
        )
