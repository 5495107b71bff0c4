"""The worker: loads plugins, runs their slots, reports state over the backend.

Modules, one concept each:

* ``agent``: the :class:`~fleet.worker.agent.Worker` (registration, heartbeat,
  config/control/cancel events, the 30 s safety-net re-read, shutdown);
* ``runner``: one automation type inside a worker (its config, its slots);
* ``reconcile`` / ``configstate`` / ``backoff``: the pure decisions;
* ``slots``: what every slot is (its shared parts, phases, stop and cancel);
  ``batch`` and ``continuous``: the two slot loops;
* ``steps`` / ``outcomes`` / ``settle``: a batch task as a pipeline — the steps
  (admit, lease, the ``suspects`` gate, attempt) return an outcome, one table maps
  it to an action, ``settle`` carries it out;
* ``feeder``: one blocking reserver per batch type, k tasks per call for k idle slots
  (and, while the queue is busy, up to one task per slot held ahead);
* ``leases``: lease renewal of running tasks and batched acks;
* ``process`` / ``cli`` / ``run_local``: ``fleet worker``, ``fleet run``, ``fleet plugins``.

Environment (besides ``FLEET_BACKEND_URL`` and ``FLEET_HEARTBEAT_SECONDS``):
``FLEET_PLUGINS`` (extra plugin modules, comma separated),
``FLEET_RETRY_BASE_SECONDS`` / ``FLEET_RETRY_MAX_SECONDS`` (task retry backoff,
default 1 s doubling up to 300 s, with jitter), ``FLEET_RESYNC_SECONDS``
(safety-net config re-read, default 30 s) and ``FLEET_UVLOOP`` (``0``: asyncio's
own event loop even when uvloop is installed).
"""
