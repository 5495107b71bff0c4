"""Task groups: fleet-wide limits per group, fair dispatch, throttling.

The queue side of flow control (docs/flow-control.md). A task pushed with
``TaskBody.group`` set waits in its group; :meth:`TaskQueues.reserve` serves the
groups that have budget round robin and never charges a waiting task an attempt.

The rule every backend applies, atomically within one reserve:

* Order. Within each priority tier (high, then normal, then low), reserve
  alternates between the tasks without a group (FIFO, exactly as before groups)
  and the groups whose best pending tier is that tier, one task per turn; the
  groups take turns round robin (a group served goes to the back of the line), so
  a big group does not starve a small one. Within a group, high before normal
  before low, FIFO within a tier.
* Budget (:func:`fleet.core.flow.admit`). A group is served only if it is not
  paused, not throttled, below its concurrency cap (reserved and not yet ended,
  fleet-wide) and its rate allows a start now (GCRA: one start every
  ``interval``). A group without budget is set aside until it has budget again —
  a task of it ends (concurrency), its time comes (rate, throttle), it is resumed
  or its settings change — so it costs nothing while it waits: no head-of-line
  blocking, and O(log G) per task in the number of groups G.
* Limits. A group's own :class:`~fleet.core.flow.GroupSettings` win field by
  field; a field left None takes the type's value (``group_concurrency``,
  ``group_rate`` of its config), stored in the backend by
  :meth:`TaskGroups.set_defaults` and read by reserve inside its atomic
  step: a change holds from the next reserve on every worker, blocked or not.
* Running. A group's running count goes up at reserve and down when the
  reservation ends: ack, nack (retry or DLQ), release, :meth:`throttle`, a sweep
  re-queue, and a stale lease's end. Its tasks keep every lease, fencing, attempt,
  retry and DLQ rule of ``TaskQueues``; a retried or swept task goes back into its
  group (a sweep re-queue at the head of its group).
* Waking. When a group gets budget back because a task ended, was resumed or its
  settings changed, one blocked reserver wakes; ``reserve`` waits no longer than
  the earliest time a throttled or rate-limited group with pending tasks is due.
* Depths. ``depths()`` counts pending tasks of every group in their tiers.
"""

from __future__ import annotations

import abc

from fleet.core.capabilities.proxies import ProxyPolicy
from fleet.core.flow import GroupInfo, GroupLimits, GroupPage, GroupSettings


class TaskGroups(abc.ABC):
    """Per-group state of a type's queue: settings, counts, throttling."""

    @abc.abstractmethod
    async def throttle(
        self, automation_type: str, task_id: str, token: str, *, retry_after: float
    ) -> bool:
        """End an owned reservation without charging its attempt (``attempt`` -= 1)
        because the outside world asked to slow down (``raise Throttled``).

        A task with a group goes back to the *head* of its group, and the group is
        throttled fleet-wide until ``now + retry_after`` (a later throttle already
        in place is kept); its running count goes down. A task without a group is
        scheduled ``retry_after`` from now, keeping its priority. Not counted as a
        failure. False, and no change, if the token is stale.
        """

    @abc.abstractmethod
    async def page(
        self, automation_type: str, *, after: str | None = None, limit: int = 1000
    ) -> GroupPage:
        """The type's groups ordered by name, at most ``limit`` of them, starting
        after the name ``after``. A group is listed while it has pending or
        running tasks, its own settings, or a throttle (or a rate's wait) in force;
        a task scheduled for a retry joins its group's count when it comes due.
        ``limit`` below 1 counts as 1."""

    @abc.abstractmethod
    async def info(self, automation_type: str, group: str) -> GroupInfo:
        """One group's counts, settings and throttle; a group never seen answers
        zeros, no settings and no throttle."""

    @abc.abstractmethod
    async def set(self, automation_type: str, group: str, settings: GroupSettings) -> None:
        """Replace the group's own settings (effective at the next reserve, fleet
        wide). Resuming a paused group with pending tasks, or raising its limits,
        puts it back in the rotation and wakes one reserver. Settings that
        override nothing (:attr:`GroupSettings.empty`) are the same as none."""

    @abc.abstractmethod
    async def set_defaults(
        self,
        automation_type: str,
        limits: GroupLimits,
        *,
        gen: int,
        proxy: ProxyPolicy | None = None,
    ) -> bool:
        """Store the type's fleet-wide limits as of config generation ``gen``, as one
        record: ``limits`` for its groups without settings of their own, ``proxy``
        for its proxies (None: none, each caller's own values apply). A stored
        record of a higher generation is kept (a worker applying an older config
        late cannot undo a newer one; equal generations: the later write wins).
        True if stored.

        Effective at the next reserve, fleet wide. A change of ``limits`` puts every
        group held by the old limits (saturated or delayed) back in the rotation,
        checked at its turn, and wakes one reserver. ``proxy`` holds from the next
        :meth:`~fleet.core.capabilities.proxies.ProxyHealth.take` and
        ``proxy_report`` naming the type, on every worker."""

    @abc.abstractmethod
    async def defaults(self, automation_type: str) -> tuple[GroupLimits, int]:
        """The stored limits of the type and their generation; ``(GroupLimits(), -1)``
        if none were ever stored (or the backend lost them)."""

    @abc.abstractmethod
    async def reset(self, automation_type: str, group: str) -> None:
        """Drop the group's own settings (back to the type's values) and any
        throttle in force; a group without either is left as it is."""
