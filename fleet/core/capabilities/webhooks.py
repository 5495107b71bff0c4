"""Webhooks: the subscriptions and each one's delivery log (``fleet.core.webhooks``
holds the model and the log's rule; docs/webhooks.md the guide). The deliveries
themselves are tasks of the queue, not kept here."""

from __future__ import annotations

import abc

from fleet.core.webhooks import LOG_KEEP, Delivery, Hook


class Webhooks(abc.ABC):
    """Store subscriptions; keep the newest :data:`~fleet.core.webhooks.LOG_KEEP`
    deliveries of each."""

    @abc.abstractmethod
    async def put(self, hook: Hook) -> None:
        """Store a subscription (a new one, or a new version of one: same id)."""

    @abc.abstractmethod
    async def get(self, hook_id: str) -> Hook | None:
        """The subscription, or None if unknown (or unreadable)."""

    @abc.abstractmethod
    async def all(self) -> list[Hook]:
        """Every readable subscription, oldest first (by creation time, then id)."""

    @abc.abstractmethod
    async def delete(self, hook_id: str) -> bool:
        """Forget a subscription and its log; False if it was unknown."""

    @abc.abstractmethod
    async def log(self, hook_id: str, update: Delivery, keep: int = LOG_KEEP) -> Delivery | None:
        """Apply ``update`` to the entry of its event in the subscription's log, in one
        atomic step: :func:`fleet.core.webhooks.merged` of the stored entry (None if
        there is none) and ``update``; then the entries
        :func:`fleet.core.webhooks.dropped` names for ``keep`` are removed.

        Returns:
            The entry as stored, or None if the subscription is unknown (nothing is
            written: a delivery of a deleted subscription leaves no log).
        """

    @abc.abstractmethod
    async def deliveries(self, hook_id: str, *, offset: int = 0, limit: int = 50) -> list[Delivery]:
        """The subscription's log, newest first (by creation time, then event id
        descending), ``limit`` entries from ``offset``; unreadable entries left out."""
