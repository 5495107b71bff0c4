"""Schedules at run time: the firer every worker and master runs (one of them fires,
fleet-wide, under a backend lock) and the sync of schedules declared on classes."""

from fleet.scheduler.declared import sync_declared
from fleet.scheduler.firer import ScheduleFirer, fire_due, run_now

__all__ = ["ScheduleFirer", "fire_due", "run_now", "sync_declared"]
