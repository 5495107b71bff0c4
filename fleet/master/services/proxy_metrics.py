"""The proxy part of ``/metrics``: counts over every proxy, and per-proxy numbers for a
bounded few (the cooling ones first, then the most used), so that a provider handing
out thousands of sessions cannot explode the label cardinality."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from fleet.core.capabilities.proxies import ProxyHealth, ProxyInfo

#: Proxies exported with their own label.
TOP_PROXIES = 20
#: Proxies looked at per scrape (a scrape stays bounded).
PROXIES_EXAMINED = 5000


@dataclass
class ProxySnapshot:
    """What one scrape knows of the proxies."""

    known: int = 0
    cooling: int = 0
    in_use: int = 0
    top: list[ProxyInfo] = field(default_factory=list)


async def gather_proxies(backend: ProxyHealth) -> ProxySnapshot:
    """Read the proxies' health for one scrape."""
    found = await backend.listing(limit=PROXIES_EXAMINED)
    ranked = sorted(found, key=lambda p: (p.cooling_until is None, -p.uses, p.key))
    return ProxySnapshot(
        known=len(found),
        cooling=sum(1 for p in found if p.cooling_until is not None),
        in_use=sum(p.in_use for p in found),
        top=ranked[:TOP_PROXIES],
    )


def proxy_families(snap: ProxySnapshot) -> Iterator[Metric]:
    """The proxy metric families of one scrape."""
    known = GaugeMetricFamily(
        "fleet_proxies", f"Proxies used or reported in the last hour (up to {PROXIES_EXAMINED})"
    )
    known.add_metric([], float(snap.known))
    cooling = GaugeMetricFamily("fleet_proxy_cooling", "Proxies cooling down now")
    cooling.add_metric([], float(snap.cooling))
    in_use = GaugeMetricFamily("fleet_proxy_in_use", "Slots using a proxy now, fleet-wide")
    in_use.add_metric([], float(snap.in_use))
    label = f"of the {TOP_PROXIES} proxies shown (cooling ones first, then the most used)"
    uses = CounterMetricFamily(
        "fleet_proxy_uses", f"Times slots took a proxy, {label}", labels=["proxy"]
    )
    failures = CounterMetricFamily(
        "fleet_proxy_failures", f"Bad reports of a proxy, {label}", labels=["proxy"]
    )
    slots = GaugeMetricFamily(
        "fleet_proxy_slots", f"Slots using a proxy now, {label}", labels=["proxy"]
    )
    until = GaugeMetricFamily(
        "fleet_proxy_cooling_until_seconds",
        f"End of a proxy's cool-down (Unix time; 0: not cooling), {label}",
        labels=["proxy"],
    )
    for p in snap.top:
        uses.add_metric([p.key], float(p.uses))
        failures.add_metric([p.key], float(p.failures))
        slots.add_metric([p.key], float(p.in_use))
        until.add_metric([p.key], float(p.cooling_until or 0.0))
    yield from (known, cooling, in_use, uses, failures, slots, until)
