"""``fleet dev`` as a library: a master and a worker as child processes on one
backend, plus (``demo=True``) the demo site, three local forward proxies (distinct
exits, each in one identity of the pool ``demo``) and a stream of demo tasks.

Ctrl-C (SIGINT) or SIGTERM stops everything: the feeder first, then each child
once (the worker drains within ``grace``), then the demo site and its proxies.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from fleet.backends import redact_url
from fleet.client.tokenfile import ensure_token, token_path
from fleet.dev.demo_proxies import DemoProxy, start_demo_proxies, stop_demo_proxies
from fleet.dev.demo_seed import (
    DEMO_IDENTITY_POOL,
    DEMO_PLUGINS,
    DemoUnavailable,
    demo_configs,
    demo_identities,
    demo_pythonpath,
    feed_tasks,
    seed_tasks,
)
from fleet.dev.demo_site import create_demo_app
from fleet.dev.procs import Child
from fleet.dev.serve import RunningServer, start_server
from fleet.dev.summary import summary_line
from fleet.settings import DEFAULT_MASTER_URL

Echo = Callable[[str, str], None]


class DevError(RuntimeError):
    """``fleet dev`` cannot start (bad backend URL, port in use, a child died)."""


@dataclass(frozen=True)
class DevOptions:
    """What ``fleet dev`` runs.

    Attributes:
        backend_url: Shared by master and worker (not ``memory://``: they are two processes).
        host / port: Where the master (and the dashboard) listen.
        plugins: Extra ``MODULE[:ATTR]`` plugin specs for both.
        demo: Also serve the demo site and submit demo tasks.
        demo_port: The demo site's port (0: any free port); its proxies take the
            three ports after it (any free ones when it is 0 or they are in use).
        grace: Seconds the worker gets to finish running tasks on stop.
        feed_seconds: Period of the demo's trickle of new tasks (0: seed only).
        admin_token: The token to use (None: ``FLEET_ADMIN_TOKEN`` or the token file).
        ready_timeout: Seconds to wait for the master to answer ``/readyz``.
        fleet_argv: The command that runs the ``fleet`` CLI in a child.
        verbose: Also show one log line per HTTP request.
        summary_seconds: Period of the progress summary line (0: none).
    """

    backend_url: str
    host: str = "127.0.0.1"
    port: int = 8000
    plugins: tuple[str, ...] = ()
    demo: bool = False
    demo_port: int = 8765
    grace: float = 5.0
    feed_seconds: float = 3.0
    admin_token: str | None = None
    ready_timeout: float = 60.0
    fleet_argv: tuple[str, ...] = (sys.executable, "-m", "fleet")
    verbose: bool = False
    summary_seconds: float = 10.0


def check_backend_url(url: str) -> None:
    """Raise :class:`DevError` for a backend two processes cannot share."""
    if urlsplit(url).scheme.lower() == "memory":
        raise DevError(
            "memory:// lives inside one process, but fleet dev runs the master and the "
            "worker as two; use sqlite:///./fleet.db (the default) or redis://"
        )


def child_env(options: DevOptions, token: str, pythonpath: list[str]) -> dict[str, str]:
    """The environment of the master and worker processes."""
    env = dict(os.environ)
    env.update(
        FLEET_BACKEND_URL=options.backend_url,
        FLEET_ADMIN_TOKEN=token,
        FLEET_MASTER_URL=f"http://{options.host}:{options.port}",
        PYTHONUNBUFFERED="1",
    )
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join([*pythonpath, *filter(None, [env.get("PYTHONPATH")])])
    return env


NO_PLUGINS_HINT = (
    "no automation plugins are installed, so only the master runs; install one "
    "(e.g. pip install -e examples/pinger), pass --plugin MODULE, or try --demo"
)


def has_plugins(specs: tuple[str, ...]) -> bool:
    """Whether a worker would find any automation (entry points, FLEET_PLUGINS, ``specs``)."""
    from fleet.plugins import discover

    return bool(discover(specs).types)


def plugin_args(options: DevOptions) -> list[str]:
    """``--plugin`` arguments for both children (user's specs, then the demo's)."""
    specs = [*options.plugins, *(DEMO_PLUGINS if options.demo else ())]
    return [arg for spec in dict.fromkeys(specs) for arg in ("--plugin", spec)]


class DevRunner:
    """Runs one ``fleet dev`` session; :meth:`run` returns the exit status."""

    def __init__(self, options: DevOptions, echo: Echo) -> None:
        self.options = options
        self.echo = echo
        self.stop = asyncio.Event()
        self.master_url = f"http://{options.host}:{options.port}"
        self.children: list[Child] = []
        self.demo_site: RunningServer | None = None
        self.demo_proxies: list[DemoProxy] = []
        self._feeder: asyncio.Task[None] | None = None
        self._reporter: asyncio.Task[None] | None = None
        self.forced = False

    async def run(self) -> int:
        """Start everything, wait for a signal (or a child's death), stop everything.

        Returns:
            0 after a requested stop where every part stopped by itself, else 1.
        """
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            clean = await self._run()
        except (DevError, DemoUnavailable) as exc:
            self.echo("dev", f"error: {exc}")
            clean = False
        finally:
            clean_stop = await self._shutdown()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
        return 0 if clean and clean_stop and not self.forced else 1

    def _on_signal(self, sig: int) -> None:
        name = signal.Signals(sig).name
        if not self.stop.is_set():
            self.echo("dev", f"{name}: stopping (this takes a few seconds; again to kill)")
            self.stop.set()
            return
        # A second Ctrl-C: the user does not want to wait for the graceful stop.
        self.echo("dev", f"{name} again: killing master and worker")
        self.forced = True
        for child in self.children:
            child.kill()

    async def _run(self) -> bool:
        opts = self.options
        check_backend_url(opts.backend_url)
        token = opts.admin_token or os.environ.get("FLEET_ADMIN_TOKEN") or ensure_token()[0]
        pythonpath = demo_pythonpath() if opts.demo else []
        env = child_env(opts, token, pythonpath)
        python = list(opts.fleet_argv)
        site_url = None
        if opts.demo:
            try:
                self.demo_site = await start_server(create_demo_app(), opts.host, opts.demo_port)
            except OSError as exc:
                raise DevError(
                    f"cannot serve the demo site on port {opts.demo_port}: {exc}"
                ) from exc
            site_url = self.demo_site.url
            self.echo("demo", f"demo site on {site_url}")
            first = self.demo_site.port + 1 if opts.demo_port else 0
            # Loopback only, whatever --host says: a proxy that reaches this machine's
            # loopback services must not be open to the network.
            try:
                self.demo_proxies = await start_demo_proxies("127.0.0.1", first)
            except OSError as exc:
                raise DevError(f"cannot start the demo's proxies: {exc}") from exc
        master = Child(
            "master",
            [*python, "master", "--host", opts.host, "--port", str(opts.port), *plugin_args(opts)],
            env,
            self.echo,
            quiet=not opts.verbose,
        )
        self.children.append(master)
        worker_argv = [*python, "worker", "--grace", str(opts.grace), *plugin_args(opts)]
        worker = Child("worker", worker_argv, env, self.echo, quiet=not opts.verbose)
        await master.start()
        run_worker = opts.demo or has_plugins(opts.plugins)
        # Without --demo the worker needs nothing from the master: start both at once.
        # With it, the worker starts once the demo's config is stored, so that its
        # first config already points at the demo site (the pinger's first ping too).
        if run_worker and site_url is None:
            await self._start_worker(worker)
        elif not run_worker:
            self.echo("dev", NO_PLUGINS_HINT)
        async with httpx.AsyncClient(
            base_url=self.master_url, headers={"Authorization": f"Bearer {token}"}, timeout=10
        ) as client:
            if not await self._wait_ready(client, master):
                return self.stop.is_set()
            if site_url is not None:
                await self._configure_demo(client, site_url)
                await self._start_worker(worker)
            self._banner(token, site_url)
            if site_url is not None:
                self._feeder = asyncio.create_task(self._feed(client, site_url), name="demo-feed")
            if opts.summary_seconds > 0:
                self._reporter = asyncio.create_task(self._report(client), name="dev-summary")
            return await self._wait_for_stop()

    async def _start_worker(self, worker: Child) -> None:
        self.children.append(worker)
        await worker.start()

    async def _wait_ready(self, client: httpx.AsyncClient, master: Child) -> bool:
        """Poll ``/readyz`` until 200; False if stopped meanwhile.

        Raises:
            DevError: The master exited or did not get ready in time.
        """
        deadline = asyncio.get_running_loop().time() + self.options.ready_timeout
        while not self.stop.is_set():
            if master.returncode is not None:
                raise DevError(f"the master exited with status {master.returncode} (see above)")
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get("/readyz")).status_code == 200:
                    return True
            if asyncio.get_running_loop().time() > deadline:
                raise DevError(f"the master did not answer {self.master_url}/readyz in time")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), 0.2)
        return False

    async def _wait_for_stop(self) -> bool:
        """Wait for a signal (True) or for a child to exit on its own (False)."""
        waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(self.stop.wait())]
        waits += [asyncio.ensure_future(child.wait()) for child in self.children]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        if self.stop.is_set():
            return True
        for child in self.children:
            if child.returncode is not None:
                self.echo("dev", f"{child.name} exited with status {child.returncode}; stopping")
        return False

    async def _shutdown(self) -> bool:
        """Stop the feeder, then every child, then the demo site; True if all went cleanly."""
        for task in (self._feeder, self._reporter):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        timeout = self.options.grace + 10
        results = await asyncio.gather(*(c.stop(timeout) for c in reversed(self.children)))
        if self.demo_site is not None:
            await self.demo_site.stop()
        await stop_demo_proxies(self.demo_proxies)
        if self.children:
            self.echo("dev", "stopped")
        return all(results)

    async def _configure_demo(self, client: httpx.AsyncClient, site_url: str) -> None:
        await self._put_identities(client)
        for automation_type, patch in demo_configs(site_url).items():
            response = await client.patch(
                f"/api/v1/automations/{automation_type}/config", json=patch
            )
            if response.status_code != 200:
                self.echo(
                    "dev", f"config of {automation_type}: {response.status_code} {response.text}"
                )

    async def _put_identities(self, client: httpx.AsyncClient) -> None:
        """One identity per demo proxy in the pool ``demo``: put again on every start
        (an empty jar: the demo site forgot every clearance), and any that a past run
        left cooling or retired brought back."""
        pool = f"/api/v1/identities/{DEMO_IDENTITY_POOL}"
        body = demo_identities([p.url for p in self.demo_proxies])
        response = await client.post(pool, json=body)
        if response.status_code != 200:
            self.echo(
                "dev", f"identities of {DEMO_IDENTITY_POOL}: {response.status_code} {response.text}"
            )
            return
        listed = await client.get(pool, params={"limit": 500})
        for item in listed.json().get("items", []) if listed.status_code == 200 else []:
            if item.get("state") in ("cooling", "retired"):
                await client.post(f"{pool}/{item['id']}/revive")

    async def _submit(
        self, client: httpx.AsyncClient, batches: dict[str, list[dict[str, Any]]]
    ) -> int:
        submitted = 0
        for automation_type, tasks in batches.items():
            response = await client.post(
                f"/api/v1/automations/{automation_type}/tasks/batch", json={"tasks": tasks}
            )
            if response.status_code != 202:
                self.echo(
                    "dev", f"submit to {automation_type}: {response.status_code} {response.text}"
                )
                continue
            submitted += sum(1 for r in response.json()["results"] if r.get("queued"))
        return submitted

    async def _feed(self, client: httpx.AsyncClient, site_url: str) -> None:
        """Seed the demo, then keep a trickle of new tasks coming until stopped."""
        rng = random.Random()
        try:
            harvests = max(1, len(self.demo_proxies))
            count = await self._submit(client, seed_tasks(site_url, rng, harvests))
            self.echo("dev", f"demo: submitted {count} tasks (harvest, scrapes, stock checks)")
            while self.options.feed_seconds > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), self.options.feed_seconds)
                    return
                await self._submit(client, feed_tasks(site_url, rng))
        except httpx.HTTPError as exc:
            self.echo("dev", f"demo feed stopped: {exc!r}")

    async def _report(self, client: httpx.AsyncClient) -> None:
        """Print a one-line summary of queues and pools every ``summary_seconds``."""
        last = ""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), self.options.summary_seconds)
                return
            try:
                automations = (await client.get("/api/v1/automations")).raise_for_status()
                pools = (await client.get("/api/v1/pools")).raise_for_status()
                identities = (await client.get("/api/v1/identities")).raise_for_status()
            except httpx.HTTPError:
                continue  # the master is restarting or stopping; its own log says why
            line = summary_line(automations.json(), pools.json(), identities.json()["pools"])
            if line != last:
                self.echo("dev", line)
                last = line

    def _banner(self, token: str, site_url: str | None) -> None:
        where = "FLEET_ADMIN_TOKEN" if os.environ.get("FLEET_ADMIN_TOKEN") else str(token_path())
        lines = [
            "",
            "Fleet is running.",
            f"  dashboard    {self.master_url}/",
            f"  admin token  {token}   (from {where})",
            f"  REST API     {self.master_url}/api/v1   (OpenAPI: /api/v1/openapi.json)",
            f"  backend      {redact_url(self.options.backend_url)}",
        ]
        if site_url is not None:
            lines.append(f"  demo site    {site_url}/")
            for proxy in self.demo_proxies:
                lines.append(f"  demo exit    {proxy.url}   (the site sees {proxy.exit})")
            if self.demo_proxies:
                lines.append(
                    f"  identities   pool {DEMO_IDENTITY_POOL!r}: one per exit "
                    f"(fleet identities {DEMO_IDENTITY_POOL})"
                )
        if self.master_url != os.environ.get("FLEET_MASTER_URL", DEFAULT_MASTER_URL):
            # The client commands look for the master at FLEET_MASTER_URL (default :8000).
            lines.append(f"  CLI          export FLEET_MASTER_URL={self.master_url}")
        lines += [
            "  try          curl -H 'Authorization: Bearer <token>' "
            f"{self.master_url}/api/v1/automations",
            "Press Ctrl-C to stop.",
            "",
        ]
        for line in lines:
            self.echo("dev", line)
