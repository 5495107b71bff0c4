"""Several hosts on one machine: Linux network namespaces joined by veth links.

A :class:`Network` is one private ``10.x.y.0/24`` LAN. Its switch is a bridge in a
"hub" namespace; every :class:`Host` is a namespace of its own with one veth pair, its
``eth0`` inside and the other end plugged into the bridge. The root namespace (the
test process) gets a link to the bridge too, so a test reaches every host directly.
All names carry a random tag, so parallel runs do not clash; :meth:`Network.destroy`
removes everything (namespaces take their veths and qdiscs with them) and is safe to
call twice.

A host's link can be cut (:meth:`Host.cut`, both ends down: packets in flight are
lost, nothing is refused, as when a cable or a switch port dies) and healed.
Latency on a link is ``tc netem`` when the kernel has it (:func:`netem_available`);
kernels without ``sch_netem`` get a delaying TCP relay inside the host's namespace
(``python -m tests.support.netns relay ...``, :class:`DelayRelay`), which holds
every chunk for the same delay in each direction.

Everything here needs root and ``ip`` (iproute2); :func:`unavailable_reason` says why
it cannot run on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import os
import random
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tests.support.waits import until_sync

IP = shutil.which("ip")
TC = shutil.which("tc")


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command (``ip ...``, ``tc ...``) and return its result; with ``check``, a
    failure raises with the command's stderr in the message."""
    done = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def in_ns(ns: str, *args: str) -> list[str]:
    """The argv that runs ``args`` inside namespace ``ns`` (``ip netns exec`` execs the
    command in place: the child's pid is the command's own)."""
    return [IP or "ip", "netns", "exec", ns, *args]


def unavailable_reason() -> str | None:
    """Why namespaces cannot be made here (not root, no ``ip``, no netns support), or
    None when they can: a throwaway namespace and veth pair are made and removed."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if IP is None:
        return "the `ip` command (iproute2) is not installed"
    tag = secrets.token_hex(3)
    ns = f"fleet-probe-{tag}"
    try:
        made = run(IP, "netns", "add", ns, check=False)
        if made.returncode != 0:
            return f"`ip netns add` failed: {made.stderr.strip()}"
        veth = run(
            IP, "link", "add", f"fp{tag}a", "type", "veth", "peer", "name", f"fp{tag}b", check=False
        )
        if veth.returncode != 0:
            return f"cannot create a veth pair: {veth.stderr.strip()}"
        return None
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        return f"network namespaces are not usable: {exc}"
    finally:
        run(IP, "link", "del", f"fp{tag}a", check=False)
        run(IP, "netns", "del", ns, check=False)


def netem_available(ns: str, dev: str) -> bool:
    """True if ``tc qdisc ... netem`` works on ``dev`` in ``ns`` (the kernel has
    ``sch_netem``); the probe qdisc is removed again."""
    if TC is None:
        return False
    added = run(
        *in_ns(ns, TC, "qdisc", "add", "dev", dev, "root", "netem", "delay", "1ms"), check=False
    )
    if added.returncode != 0:
        return False
    run(*in_ns(ns, TC, "qdisc", "del", "dev", dev, "root"), check=False)
    return True


def _free_subnet() -> ipaddress.IPv4Network:
    """A random 10.x.y.0/24 that no route or address of the root namespace overlaps."""
    taken: list[ipaddress.IPv4Network] = []
    for line in run(IP or "ip", "-4", "route", "show", "table", "all").stdout.splitlines():
        first = line.split()[0] if line.split() else ""
        if first in ("broadcast", "local", "unicast") and len(line.split()) > 1:
            first = line.split()[1]
        with contextlib.suppress(ValueError):
            if first != "default":
                taken.append(ipaddress.IPv4Network(first, strict=False))
    for _ in range(200):
        net = ipaddress.IPv4Network(f"10.{random.randrange(100, 250)}.{random.randrange(256)}.0/24")
        if not any(net.overlaps(t) for t in taken):
            return net
    raise RuntimeError("no free 10.x.y.0/24 subnet")


@dataclass
class Host:
    """One namespace on the LAN: ``eth0`` inside at :attr:`addr`, :attr:`port` (the
    other end of its veth) in the hub."""

    network: Network
    name: str
    ns: str
    addr: str
    port: str  #: the veth end plugged into the bridge, in the hub namespace
    qdiscs: list[tuple[str, str]] = field(default_factory=list)  #: (namespace, device)

    def argv(self, *args: str) -> list[str]:
        """``args`` run inside this host."""
        return in_ns(self.ns, *args)

    def cut(self) -> None:
        """Take both ends of the link down: the host is partitioned from everyone."""
        run(*in_ns(self.ns, IP or "ip", "link", "set", "eth0", "down"))
        run(*in_ns(self.network.hub, IP or "ip", "link", "set", self.port, "down"))

    def heal(self) -> None:
        """Bring the link back up (the address and its route come back with it)."""
        run(*in_ns(self.network.hub, IP or "ip", "link", "set", self.port, "up"))
        run(*in_ns(self.ns, IP or "ip", "link", "set", "eth0", "up"))

    def netem(self, *spec: str) -> None:
        """``tc qdisc replace ... root netem SPEC`` on both ends of the link (so a
        ``delay 50ms`` holds packets 50 ms each way)."""
        for ns, dev in ((self.ns, "eth0"), (self.network.hub, self.port)):
            run(*in_ns(ns, TC or "tc", "qdisc", "replace", "dev", dev, "root", "netem", *spec))
            self.qdiscs.append((ns, dev))

    def clear_qdiscs(self) -> None:
        """Remove what :meth:`netem` added (the namespaces' removal would too)."""
        while self.qdiscs:
            ns, dev = self.qdiscs.pop()
            run(*in_ns(ns, TC or "tc", "qdisc", "del", "dev", dev, "root"), check=False)


class Network:
    """A LAN of namespaces: a bridge in ``<tag>-hub``, one veth per host, and a link
    from the root namespace (address ``.254``)."""

    def __init__(self) -> None:
        self.tag = secrets.token_hex(3)
        self.subnet = _free_subnet()
        self.prefix = self.subnet.prefixlen
        self.hub = f"fleet-{self.tag}-hub"
        self.hosts: dict[str, Host] = {}
        self._namespaces: list[str] = []
        self._root_link = f"f{self.tag}rt"
        self.root_addr = str(self.subnet.network_address + 254)

    def addr(self, index: int) -> str:
        return str(self.subnet.network_address + index)

    def _add_ns(self, ns: str) -> None:
        run(IP or "ip", "netns", "add", ns)
        self._namespaces.append(ns)
        run(*in_ns(ns, IP or "ip", "link", "set", "lo", "up"))

    def create(self) -> None:
        """The hub with its bridge, and the root namespace's link to it."""
        ip = IP or "ip"
        self._add_ns(self.hub)
        run(*in_ns(self.hub, ip, "link", "add", "br0", "type", "bridge"))
        run(*in_ns(self.hub, ip, "link", "set", "br0", "up"))
        hub_end = f"f{self.tag}rh"
        run(ip, "link", "add", self._root_link, "type", "veth", "peer", "name", hub_end)
        run(ip, "link", "set", hub_end, "netns", self.hub)
        run(*in_ns(self.hub, ip, "link", "set", hub_end, "master", "br0", "up"))
        run(ip, "addr", "add", f"{self.root_addr}/{self.prefix}", "dev", self._root_link)
        run(ip, "link", "set", self._root_link, "up")

    def add_host(self, name: str) -> Host:
        """A new namespace ``fleet-<tag>-<name>`` on the LAN, at the next address."""
        ip = IP or "ip"
        index = len(self.hosts) + 10
        ns = f"fleet-{self.tag}-{name}"
        self._add_ns(ns)
        inner, outer = f"f{self.tag}{index}i", f"f{self.tag}{index}o"
        run(ip, "link", "add", inner, "type", "veth", "peer", "name", outer)
        run(ip, "link", "set", inner, "netns", ns)
        run(ip, "link", "set", outer, "netns", self.hub)
        run(*in_ns(ns, ip, "link", "set", inner, "name", "eth0"))
        run(*in_ns(ns, ip, "addr", "add", f"{self.addr(index)}/{self.prefix}", "dev", "eth0"))
        run(*in_ns(ns, ip, "link", "set", "eth0", "up"))
        run(*in_ns(self.hub, ip, "link", "set", outer, "master", "br0", "up"))
        host = Host(self, name, ns, self.addr(index), outer)
        self.hosts[name] = host
        return host

    def wait_reachable(self, host: Host, timeout: float = 10.0) -> None:
        """Until the root namespace gets an answer from ``host`` (the bridge learned
        the ports, ARP works): a TCP connect to a closed port is refused, not dropped."""

        def answers() -> bool:
            try:
                with socket.create_connection((host.addr, 9), timeout=0.5):
                    return True
            except ConnectionRefusedError:
                return True

        until_sync(
            answers,
            timeout=timeout,
            interval=0.05,
            what=f"{host.name} ({host.addr}) to be reachable",
            ignoring=(OSError,),
        )

    def destroy(self) -> None:
        """Remove every namespace (with their veths and qdiscs) and the root link."""
        ip = IP or "ip"
        for host in self.hosts.values():
            host.clear_qdiscs()
        for ns in reversed(self._namespaces):
            run(ip, "netns", "del", ns, check=False)
        self._namespaces.clear()
        run(ip, "link", "del", self._root_link, check=False)  # gone with its peer, usually


class NsProcess:
    """A child process started with ``argv`` (usually :meth:`Host.argv`), its stdout
    and stderr in ``log_path``; :meth:`close` kills it and closes the log."""

    def __init__(
        self, argv: Sequence[str], log_path: Path, *, env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:  # fmt: skip
        self.log_path = log_path
        self._log: IO[bytes] = log_path.open("wb")
        self.proc = subprocess.Popen(
            list(argv), env=env, cwd=cwd, stdout=self._log, stderr=subprocess.STDOUT
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        self._log.close()


# ---------------------------------------------------------------- delaying relay


class DelayRelay:
    """Forwards ``listen`` to ``upstream``, holding every chunk ``delay`` seconds in
    each direction and keeping its order: a link's latency, for kernels without netem.
    Runs inside the host's namespace (``python -m tests.support.netns relay``)."""

    def __init__(self, listen: tuple[str, int], upstream: tuple[str, int], delay: float) -> None:
        self.listen = listen
        self.upstream = upstream
        self.delay = delay

    async def serve(self) -> None:
        server = await asyncio.start_server(self._serve, *self.listen)
        async with server:
            await server.serve_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: deque[tuple[float, bytes]] = deque()
        more = asyncio.Event()

        async def send() -> None:
            while True:
                await more.wait()
                more.clear()
                while queue:
                    due, data = queue[0]
                    wait = due - time.monotonic()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    queue.popleft()
                    if not data:
                        writer.close()
                        return
                    writer.write(data)
                    await writer.drain()

        sender = asyncio.create_task(send())
        try:
            while True:
                data = await reader.read(65536)
                queue.append((time.monotonic() + self.delay, data))
                more.set()
                if not data:
                    break
            await sender
        except (OSError, asyncio.IncompleteReadError):
            sender.cancel()
            writer.close()


def rtt_ms(host: str, port: int, count: int = 10) -> float:
    """Median milliseconds of a Redis ``PING`` round trip to ``host:port``."""
    samples: list[float] = []
    with socket.create_connection((host, port), timeout=5) as s:
        for _ in range(count):
            started = time.perf_counter()
            s.sendall(b"PING\r\n")
            if not s.recv(64).startswith(b"+PONG"):
                raise RuntimeError("no PONG")
            samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def _hostport(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.netns")
    sub = parser.add_subparsers(dest="cmd", required=True)
    relay = sub.add_parser("relay", help="a delaying TCP relay")
    relay.add_argument("listen", help="HOST:PORT to listen on")
    relay.add_argument("upstream", help="HOST:PORT to forward to")
    relay.add_argument("delay_ms", type=float, help="delay of each direction")
    rtt = sub.add_parser("rtt", help="median Redis PING round trip in ms")
    rtt.add_argument("target", help="HOST:PORT of a Redis server")
    args = parser.parse_args(argv)
    if args.cmd == "relay":
        r = DelayRelay(_hostport(args.listen), _hostport(args.upstream), args.delay_ms / 1000)
        asyncio.run(r.serve())
    else:
        print(f"{rtt_ms(*_hostport(args.target)):.1f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
