"""Building a slot's ``ctx.proxy`` from config: fixed URLs or a provider found
through the entry-point group ``fleet.proxy_providers`` (built in: ``template``), with
the health settings of the config over the backend's proxy health."""

from __future__ import annotations

from fleet.core.capabilities.proxies import ProxyHealth
from fleet.core.config import BaseConfig
from fleet.core.errors import ConfigError
from fleet.core.proxy import (
    ProxyHandle,
    ProxyPolicy,
    provider_factory,
    split_proxy_urls,
)


def build_proxy(
    config: BaseConfig, slot_id: int, health: ProxyHealth | None = None, *, owner: str = ""
) -> ProxyHandle:
    """The proxy handle of one slot under ``config``.

    A provider wins over ``proxy_url``; fixed URLs are spread over slots by id.
    ``health`` (the backend) shares scores, cool-downs, places and sticky choices
    fleet-wide; ``owner`` (the automation type) names the slot's proxies in log lines.

    Raises:
        ConfigError: The provider is unknown or rejects its config.
    """
    policy = ProxyPolicy.of(config)
    if config.proxy_provider:
        factory = provider_factory(config.proxy_provider)
        try:
            provider = factory(dict(config.proxy_provider_config))
        except (ValueError, TypeError, KeyError) as exc:
            raise ConfigError(
                f"proxy_provider {config.proxy_provider!r}: {exc}", field="proxy_provider_config"
            ) from exc
        return ProxyHandle(
            provider=provider, index=slot_id, health=health, policy=policy, owner=owner
        )
    urls = split_proxy_urls(config.proxy_url)
    return ProxyHandle(urls=urls, index=slot_id, health=health, policy=policy, owner=owner)
