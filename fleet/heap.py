"""The garbage collector of a worker or master process, set once its imports are done.

Why: a busy worker allocates a few container objects per task (futures, coroutines,
its reservation and records), and a master a few per request, and frees most of them
soon after, but Python collects
its young generation every 700 net allocations, and every tenth time the generation
above; the oldest one holds what the imports left alive (pydantic, redis-py, the
plugins: ~55,000 tracked objects in the benchmark's worker), and a full collection
walks all of it. Draining one-INCR tasks with 50 slots, collections took ~14 % of the
worker's time; a master answering single-task submits spent ~15 % of its CPU there
(bench/README.md, round four, fourth session).

So the objects alive after the imports are frozen (``gc.freeze``: never walked
again; they live as long as the process anyway), and the young generation is
collected every ``FLEET_GC_THRESHOLD`` net allocations (default 10,000; 0 keeps
Python's own). Reference cycles are still collected, only in larger rounds.

Before that, the ``fleet`` command keeps the collector off (:func:`hold`) while it
imports and starts: everything allocated then lives on, and walking it cost a worker
~20 ms of its start (109 young and 9 middle collections up to :func:`settle`). The
few cyclic leftovers of the imports (~800 objects in the benchmark's worker) are
frozen with the rest, as Python's documentation of ``gc.freeze`` advises. A command
that does not settle gets the collector back before its own code runs
(:func:`release`).
"""

from __future__ import annotations

import gc

#: The young generation's threshold a worker or master sets unless told otherwise.
DEFAULT_THRESHOLD = 10_000


def hold() -> None:
    """Keep the collector off until :func:`settle` or :func:`release`."""
    gc.disable()


def release() -> None:
    """The collector on again, as Python runs it (for a command that does not settle)."""
    gc.enable()


def settle(threshold: int = DEFAULT_THRESHOLD) -> None:
    """Freeze every object alive now and, if ``threshold`` > 0, collect the young
    generation every ``threshold`` net allocations (the older generations keep
    their ratios); the collector runs from now on, also after :func:`hold`."""
    gc.freeze()
    if threshold > 0:
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(threshold, older, oldest)
    gc.enable()
