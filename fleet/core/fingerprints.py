"""Generated identities: fingerprints coherent with the exit's country (docs/identities.md).

A fingerprint comes from browserforge (the ``identities`` extra: ``pip install
'fleet-automation[identities]'``), which draws a real browser's User-Agent, client
hints, platform and screen from its statistics of current browsers. What it cannot
know Fleet sets from the country of the identity's exit: the ``locale`` and the
``timezone`` (:data:`COUNTRIES`), and an ``Accept-Language`` as the browser sends it
for that locale. The ``Sec-Fetch-*`` headers are those of a navigation the user typed
(``none``, ``navigate``, ``?1``, ``document``), whatever browserforge gave.

:func:`generate_identities` makes a whole batch: the ``n``-th identity takes the
``n``-th proxy, country and browser of their lists, round robin, so with one country
per proxy each proxy keeps its country. Pure and synchronous (a thousand take about a
second): the master runs it off its event loop.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from fleet.core.errors import ConfigError, ContractValueError, Unsupported
from fleet.core.identities import Fingerprint, Identity, check_identity_id, parse_identity
from fleet.core.proxy import ProxyProvider, provider_factory

#: Browsers a fingerprint may be drawn for.
Browser = Literal["chrome", "firefox", "edge", "safari"]
BROWSERS: tuple[Browser, ...] = ("chrome", "firefox", "edge", "safari")
#: The operating systems a browser is drawn on (Safari runs on macOS only).
_SYSTEMS: dict[str, tuple[str, ...]] = {
    "chrome": ("windows", "macos", "linux"),
    "firefox": ("windows", "macos", "linux"),
    "edge": ("windows", "macos"),
    "safari": ("macos",),
}

#: Country (ISO 3166 alpha-2) -> (locale, timezone) of a browser there: its capital's
#: or largest city's zone, the country's main language.
COUNTRIES: dict[str, tuple[str, str]] = {
    "AE": ("ar-AE", "Asia/Dubai"),
    "AR": ("es-AR", "America/Argentina/Buenos_Aires"),
    "AT": ("de-AT", "Europe/Vienna"),
    "AU": ("en-AU", "Australia/Sydney"),
    "BE": ("nl-BE", "Europe/Brussels"),
    "BR": ("pt-BR", "America/Sao_Paulo"),
    "CA": ("en-CA", "America/Toronto"),
    "CH": ("de-CH", "Europe/Zurich"),
    "CL": ("es-CL", "America/Santiago"),
    "CN": ("zh-CN", "Asia/Shanghai"),
    "CO": ("es-CO", "America/Bogota"),
    "CZ": ("cs-CZ", "Europe/Prague"),
    "DE": ("de-DE", "Europe/Berlin"),
    "DK": ("da-DK", "Europe/Copenhagen"),
    "EG": ("ar-EG", "Africa/Cairo"),
    "ES": ("es-ES", "Europe/Madrid"),
    "FI": ("fi-FI", "Europe/Helsinki"),
    "FR": ("fr-FR", "Europe/Paris"),
    "GB": ("en-GB", "Europe/London"),
    "GR": ("el-GR", "Europe/Athens"),
    "HK": ("zh-HK", "Asia/Hong_Kong"),
    "HU": ("hu-HU", "Europe/Budapest"),
    "ID": ("id-ID", "Asia/Jakarta"),
    "IE": ("en-IE", "Europe/Dublin"),
    "IL": ("he-IL", "Asia/Jerusalem"),
    "IN": ("en-IN", "Asia/Kolkata"),
    "IT": ("it-IT", "Europe/Rome"),
    "JP": ("ja-JP", "Asia/Tokyo"),
    "KR": ("ko-KR", "Asia/Seoul"),
    "MX": ("es-MX", "America/Mexico_City"),
    "MY": ("ms-MY", "Asia/Kuala_Lumpur"),
    "NG": ("en-NG", "Africa/Lagos"),
    "NL": ("nl-NL", "Europe/Amsterdam"),
    "NO": ("nb-NO", "Europe/Oslo"),
    "NZ": ("en-NZ", "Pacific/Auckland"),
    "PH": ("en-PH", "Asia/Manila"),
    "PL": ("pl-PL", "Europe/Warsaw"),
    "PT": ("pt-PT", "Europe/Lisbon"),
    "RO": ("ro-RO", "Europe/Bucharest"),
    "RU": ("ru-RU", "Europe/Moscow"),
    "SA": ("ar-SA", "Asia/Riyadh"),
    "SE": ("sv-SE", "Europe/Stockholm"),
    "SG": ("en-SG", "Asia/Singapore"),
    "TH": ("th-TH", "Asia/Bangkok"),
    "TR": ("tr-TR", "Europe/Istanbul"),
    "TW": ("zh-TW", "Asia/Taipei"),
    "UA": ("uk-UA", "Europe/Kyiv"),
    "US": ("en-US", "America/New_York"),
    "VN": ("vi-VN", "Asia/Ho_Chi_Minh"),
    "ZA": ("en-ZA", "Africa/Johannesburg"),
}
#: The country of an identity generated without one.
DEFAULT_COUNTRY = "US"
#: The headers of a navigation typed in the address bar (browserforge mixes them up).
_NAVIGATION = {
    "sec-fetch-site": "none",
    "sec-fetch-mode": "navigate",
    "sec-fetch-user": "?1",
    "sec-fetch-dest": "document",
}
#: Height the browser's own bars take from its window.
_BARS = 85


def check_country(value: object, where: str) -> str:
    """An upper-case country code of :data:`COUNTRIES`.

    Raises:
        ContractValueError: naming ``where`` and the countries Fleet knows.
    """
    code = value.upper() if isinstance(value, str) else value
    if not isinstance(code, str) or code not in COUNTRIES:
        raise ContractValueError(
            f"unknown country {value!r}: one of {', '.join(sorted(COUNTRIES))}", field=where
        )
    return code


def check_browser(value: object, where: str) -> Browser:
    """A browser of :data:`BROWSERS`.

    Raises:
        ContractValueError: naming ``where``.
    """
    name = value.lower() if isinstance(value, str) else value
    for browser in BROWSERS:
        if name == browser:
            return browser
    raise ContractValueError(
        f"unknown browser {value!r}: one of {', '.join(BROWSERS)}", field=where
    )


def accept_language(locale: str) -> str:
    """``Accept-Language`` as a browser set to ``locale`` sends it: the locale, its
    language, then English after any other language (``de-DE,de;q=0.9,en-US;q=0.8,en;q=0.7``)."""
    language = locale.split("-", 1)[0]
    parts = [locale]
    if language != locale:
        parts.append(f"{language};q=0.9")
    if language != "en":
        parts += ["en-US;q=0.8", "en;q=0.7"]
    return ",".join(parts)


def _generator() -> Any:
    try:
        from browserforge.fingerprints import FingerprintGenerator
    except ImportError:
        raise Unsupported(
            "generating fingerprints needs browserforge, which this master lacks: "
            "pip install 'fleet-automation[identities]' and restart it, or post "
            "explicit identities",
            resource="fingerprint generator",
        ) from None
    return FingerprintGenerator()


def _headers(raw: dict[str, str], locale: str) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for name, value in raw.items():
        low = name.lower()
        if low == "user-agent":
            continue
        if low == "accept-language":
            value = accept_language(locale)
        out.append((name, _NAVIGATION.get(low, value)))
    if not any(name.lower() == "accept-language" for name, _ in out):
        out.append(("Accept-Language", accept_language(locale)))
    return tuple(out)


#: Draws of browserforge until one holds together (about 1 in 200 does not).
_DRAWS = 30
#: What the User-Agent says of its system -> what ``navigator.platform`` and the
#: ``sec-ch-ua-platform`` client hint then say.
_PLATFORMS = (("Windows", "Win", '"Windows"'), ("Macintosh", "Mac", '"macOS"'),
              ("X11", "Linux", '"Linux"'))  # fmt: skip


def coherent(user_agent: str, platform: str, headers: dict[str, str], width: int,
             browser: str) -> bool:  # fmt: skip
    """Whether a drawn fingerprint holds together as a desktop ``browser``: its platform
    and client hints name the system its User-Agent names, its screen is a desktop's
    (1024 pixels wide or more), and a Chromium (Chrome, Edge) sends client hints, as
    every current one does. browserforge's statistics now and then pair a Mac
    User-Agent with a Linux platform, or give a phone's screen."""
    hints = {k.lower(): v for k, v in headers.items()}
    if width < 1024 or (browser in ("chrome", "edge") and "sec-ch-ua" not in hints):
        return False
    for marker, prefix, hint in _PLATFORMS:
        if marker in user_agent:
            said = hints.get("sec-ch-ua-platform", hint)
            return platform.startswith(prefix) and said == hint
    return False


def fingerprint_for(country: str, browser: Browser, *, generator: Any = None) -> Fingerprint:
    """A desktop ``browser``'s fingerprint for an exit in ``country``: browserforge's
    User-Agent, headers (their order), platform and screen; the country's locale and
    timezone (:data:`COUNTRIES`).

    Raises:
        ContractValueError: an unknown country or browser.
        Unsupported: browserforge is not installed.
    """
    locale, timezone = COUNTRIES[check_country(country, "country")]
    browser = check_browser(browser, "browser")
    draw = generator or _generator()
    for _ in range(_DRAWS):
        made = draw.generate(browser=browser, os=_SYSTEMS[browser], device="desktop", locale=locale)
        if coherent(made.navigator.userAgent, made.navigator.platform, dict(made.headers),
                    made.screen.width, browser):  # fmt: skip
            break
    screen = made.screen
    viewport = {
        "width": int(screen.outerWidth or screen.width),
        "height": max(int(screen.outerHeight or screen.height) - _BARS, 300),
    }
    return Fingerprint(
        user_agent=made.navigator.userAgent,
        headers=_headers(dict(made.headers), locale),
        locale=locale,
        timezone=timezone,
        viewport=viewport,
        platform=made.navigator.platform,
    )


@dataclass(frozen=True, slots=True)
class GeneratePlan:
    """What to generate (``{"generate": {...}}`` of ``POST /api/v1/identities/{pool}``).

    Attributes:
        count: How many identities.
        proxies: Proxy URLs, given out round robin; ``{id}`` in one is replaced by the
            identity's id (a provider's session pinned to the identity). Empty: direct.
        countries: Country codes, round robin; one per proxy keeps each proxy's
            country. Empty: :data:`DEFAULT_COUNTRY`.
        browsers: Browsers, round robin (default: Chrome).
        id_prefix: Ids are the prefix and 12 random hex digits.
        provider: A proxy provider (``proxy_provider``) that makes each identity's
            proxy: a session pinned to the identity's id, in its country.
    """

    count: int
    proxies: tuple[str, ...] = ()
    countries: tuple[str, ...] = ()
    browsers: tuple[Browser, ...] = ("chrome",)
    id_prefix: str = "id-"
    provider: ProxyProvider | None = None


def check_plan(
    *,
    count: int,
    proxies: Sequence[str] = (),
    countries: Sequence[str] = (),
    browsers: Sequence[str] = (),
    id_prefix: str | None = None,
    proxy_provider: str | None = None,
    proxy_provider_config: dict[str, Any] | None = None,
    where: str = "generate",
) -> GeneratePlan:
    """A :class:`GeneratePlan`, every field checked (``where`` the prefix of the
    field an error names).

    Raises:
        ContractValueError: a proxy that is no proxy URL, an unknown country or
            browser, countries that pair with
            no proxy (neither one nor one per proxy), a prefix too long for an id.
    """
    for i, proxy in enumerate(proxies):
        try:
            parse_identity({"id": "x", "proxy": proxy})
        except ContractValueError as exc:
            raise ContractValueError(exc.message, field=f"{where}.proxies.{i}") from None
    codes = tuple(check_country(c, f"{where}.countries.{i}") for i, c in enumerate(countries))
    if proxies and len(codes) not in (0, 1, len(proxies)):
        raise ContractValueError(
            f"give one country, or one per proxy ({len(proxies)}); got {len(codes)}",
            field=f"{where}.countries",
        )
    kinds = tuple(check_browser(b, f"{where}.browsers.{i}") for i, b in enumerate(browsers))
    provider = None
    if proxy_provider is not None:
        if proxies:
            raise ContractValueError(
                "give proxies or a proxy_provider, not both", field=f"{where}.proxy_provider"
            )
        try:
            provider = provider_factory(proxy_provider)(dict(proxy_provider_config or {}))
        except ConfigError as exc:
            raise ContractValueError(exc.message, field=f"{where}.proxy_provider") from None
        except (TypeError, ValueError, KeyError) as exc:
            raise ContractValueError(
                f"proxy_provider {proxy_provider!r} refused its config: {exc}",
                field=f"{where}.proxy_provider_config",
            ) from None
    prefix = "id-" if id_prefix is None else id_prefix
    if prefix:
        check_identity_id(prefix + "0" * 12, what=f"{where}.id_prefix")
    return GeneratePlan(
        count=count,
        proxies=tuple(proxies),
        countries=codes,
        browsers=kinds or ("chrome",),
        id_prefix=prefix,
        provider=provider,
    )


def generate_identities(plan: GeneratePlan) -> list[Identity]:
    """``plan.count`` new identities, the ``n``-th with the ``n``-th proxy, country and
    browser of the plan's lists (round robin) and a fingerprint coherent with its
    country. No cookies, no account.

    Raises:
        Unsupported: browserforge is not installed.
    """
    generator = _generator()
    made: list[Identity] = []
    for n in range(plan.count):
        identity_id = plan.id_prefix + secrets.token_hex(6)
        proxy = plan.proxies[n % len(plan.proxies)] if plan.proxies else None
        country = plan.countries[n % len(plan.countries)] if plan.countries else DEFAULT_COUNTRY
        if plan.provider is not None:  # a session of its own, in its country
            proxy = plan.provider.url(session=identity_id, country=country.lower())
        browser = plan.browsers[n % len(plan.browsers)]
        made.append(
            Identity(
                id=identity_id,
                proxy=None if proxy is None else proxy.replace("{id}", identity_id),
                fingerprint=fingerprint_for(country, browser, generator=generator),
            )
        )
    return made
