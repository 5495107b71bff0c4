"""Building a slot's ``ctx.proxy`` from config: fixed URLs or a provider found
through the entry-point group ``fleet.proxy_providers`` (built in: ``template``), with
the health settings of the config over the backend's proxy health."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from fleet.core.capabilities.proxies import ProxyHealth
from fleet.core.config import BaseConfig
from fleet.core.errors import ConfigError
from fleet.core.proxy import (
    ProxyHandle,
    ProxyPolicy,
    ProxyProvider,
    TemplateProvider,
    split_proxy_urls,
)

#: Entry-point group of proxy providers: a callable taking the provider config.
GROUP = "fleet.proxy_providers"

_BUILTIN: dict[str, Callable[[dict[str, Any]], ProxyProvider]] = {"template": TemplateProvider}


def provider_factory(name: str) -> Callable[[dict[str, Any]], ProxyProvider]:
    """The factory registered under ``name``.

    Raises:
        ConfigError: No provider has that name (the message lists the known ones).
    """
    if name in _BUILTIN:
        return _BUILTIN[name]
    for ep in entry_points(group=GROUP):
        if ep.name == name:
            factory: Callable[[dict[str, Any]], ProxyProvider] = ep.load()
            return factory
    known = sorted({*_BUILTIN, *(ep.name for ep in entry_points(group=GROUP))})
    raise ConfigError(
        f"unknown proxy_provider {name!r}; known: {', '.join(known)}", field="proxy_provider"
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
