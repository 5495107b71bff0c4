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
"""

from __future__ import annotations

import gc

#: The young generation's threshold a worker or master sets unless told otherwise.
DEFAULT_THRESHOLD = 10_000


def settle(threshold: int = DEFAULT_THRESHOLD) -> None:
    """Freeze every object alive now and, if ``threshold`` > 0, collect the young
    generation every ``threshold`` net allocations (the older generations keep
    their ratios)."""
    gc.freeze()
    if threshold > 0:
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(threshold, older, oldest)
