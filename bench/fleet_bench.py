"""Fleet's entry in the shared peer harness (``../shared/bench/peers/common.py``).

Run through ``bench/run_peers.sh``: the harness imports ``common`` from the peers
folder, enqueues N tasks one by one (and in bulk), starts ONE ``fleet worker``
process and times the drain. ``SLOTS`` sets the worker's slots (default 10).

``--smoke`` is a smoke run, not a measurement (tests/bench runs it): N defaults
to 200 and results go to a temporary folder; the harness is ``common.py`` of the
working directory, else of ``$FLEET_BENCH_PEERS`` (default ``../shared/bench/peers``),
else the stand-in
``bench/peer_standin.py`` (Fleet's part of the protocol only).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType

from benchlib import DISTRIBUTION, worker_cmd  # bench/ is this script's own folder
from noop_plugin import Noop

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core import BaseConfig, Context, Queue
from fleet.core.submission import make_push_request

HERE = os.path.dirname(os.path.abspath(__file__))
SMOKE = "--smoke" in sys.argv[1:]


def _harness() -> ModuleType:
    """The peer harness' ``common`` module (see the module docstring)."""
    if SMOKE:
        os.environ.setdefault("N", "200")
        os.environ.setdefault("RESULTS_DIR", tempfile.mkdtemp(prefix="fleet-bench-smoke-"))
        os.environ.setdefault("LOG_DIR", os.environ["RESULTS_DIR"])
    # run_all.sh runs this script from the peers folder, where the harness lives
    sys.path.insert(0, os.getcwd())
    try:
        import common  # type: ignore[import-not-found]
    except ImportError:
        if not SMOKE:
            raise SystemExit(
                "fleet_bench.py runs inside the peer harness: run bench/run_peers.sh "
                "(or pass --smoke for a smoke run without it)"
            ) from None
        default = Path(HERE).parent.parent / "shared" / "bench" / "peers"
        shared = Path(os.environ.get("FLEET_BENCH_PEERS", default))
        if (shared / "common.py").exists():
            sys.path.insert(0, str(shared))
            import common
        else:
            import peer_standin as common
    if SMOKE:
        print(f"fleet_bench --smoke: harness {common.__file__}", file=sys.stderr)
    return common


common = _harness()
SLOTS = os.environ.get("SLOTS", "10")
TYPE = "noop"
_backend: Backend | None = None
_ctx: Context[BaseConfig] | None = None
QUEUE = Queue(TYPE, payload=Noop)


async def _get() -> Backend:
    global _backend
    if _backend is None:
        _backend = await open_backend(common.REDIS_URL)
    return _backend


async def enqueue_one(i: int) -> None:
    """One ``ctx.submit`` (what a task's ``run_one`` calls to feed another
    automation), awaited before the next, like every peer's one-by-one enqueue."""
    global _ctx
    if _ctx is None:
        config = BaseConfig()
        _ctx = Context(backend=await _get(), automation_type="producer", config=lambda: config)
    await _ctx.submit(QUEUE, Noop(i=i))


async def enqueue_bulk(n: int) -> None:
    backend = await _get()
    chunk = 5000
    for start in range(0, n, chunk):
        reqs = [make_push_request({"i": i}) for i in range(start, min(n, start + chunk))]
        await backend.queues.push(TYPE, reqs)


async def setup() -> None:
    backend = await _get()
    # the worker reads its slots from the type-wide config
    await backend.configs.set(TYPE, {"slots": int(SLOTS)})


if __name__ == "__main__":
    # The producer runs on uvloop like ctx.submit inside a worker does (the
    # worker's loop is uvloop when installed); FLEET_UVLOOP=0 for asyncio's loop.
    if os.environ.get("FLEET_UVLOOP", "1") != "0":
        import asyncio

        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    common.run(
        common.Spec(
            name=os.environ.get("LABEL", f"fleet-slots{SLOTS}"),
            package=DISTRIBUTION,  # the harness looks its version up
            concurrency=f"fleet worker, 1 process, asyncio, slots={SLOTS}",
            worker_cmd=worker_cmd(common.REDIS_URL, "noop_plugin", TYPE),
            enqueue_one=enqueue_one,
            enqueue_bulk=enqueue_bulk,
            bulk_desc="TaskQueues.push of 5,000-task chunks (one pipeline each)",
            setup=setup,
            worker_env={"PYTHONPATH": HERE},
            notes=(
                "enqueue 1-by-1 through ctx.submit; leases with fencing tokens, attempts "
                "charged at reserve, priority tiers, task records kept"
            ),
        )
    )
