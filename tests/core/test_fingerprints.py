"""Generated fingerprints are coherent with their exit's country (issue 43, item 2): the
locale and timezone follow the country, the headers a browser sends are there and say
the same, and a generate plan's lists pair up round robin."""

from __future__ import annotations

import sys
from zoneinfo import ZoneInfo

import pytest

from fleet.core.errors import ContractValueError, Unsupported
from fleet.core.fingerprints import (
    BROWSERS,
    COUNTRIES,
    accept_language,
    check_plan,
    coherent,
    fingerprint_for,
    generate_identities,
)
from fleet.core.identities import parse_identity

#: What a User-Agent names -> the platform's start, the client hint.
SYSTEMS = (("Windows", "Win", '"Windows"'), ("Macintosh", "Mac", '"macOS"'),
           ("X11", "Linux", '"Linux"'))  # fmt: skip


def test_every_country_has_a_real_timezone_and_its_own_locale() -> None:
    for code, (locale, timezone) in COUNTRIES.items():
        assert ZoneInfo(timezone) is not None
        assert locale.endswith(f"-{code}"), code


@pytest.mark.parametrize("browser", BROWSERS)
@pytest.mark.parametrize(
    ("country", "locale", "timezone"),
    [("US", "en-US", "America/New_York"), ("de", "de-DE", "Europe/Berlin"),
     ("JP", "ja-JP", "Asia/Tokyo"), ("BR", "pt-BR", "America/Sao_Paulo")],
)  # fmt: skip
def test_the_locale_and_timezone_follow_the_country(
    browser: str, country: str, locale: str, timezone: str
) -> None:
    fp = fingerprint_for(country, browser)  # type: ignore[arg-type]
    assert (fp.locale, fp.timezone) == (locale, timezone)
    headers = {name.lower(): value for name, value in fp.headers}
    assert headers["accept-language"] == accept_language(locale)
    assert headers["accept-language"].split(",")[0] == locale
    assert headers["accept"].startswith("text/html")
    assert "user-agent" not in headers  # kept apart, sent first
    assert fp.request_headers()[0] == ("User-Agent", fp.user_agent)
    name = {"chrome": "Chrome/", "firefox": "Firefox/", "edge": "Edg/", "safari": "Safari/"}
    assert name[browser] in fp.user_agent
    if browser == "safari":
        assert fp.platform == "MacIntel" and "Macintosh" in fp.user_agent
    if browser in ("chrome", "edge"):  # a navigation the user typed, client hints too
        assert headers["sec-fetch-site"] == "none" and headers["sec-fetch-mode"] == "navigate"
        assert headers["sec-fetch-user"] == "?1" and headers["sec-fetch-dest"] == "document"
        assert "sec-ch-ua" in headers
    # the platform and the client hints name the system the User-Agent names
    system = next(s for s in SYSTEMS if s[0] in fp.user_agent)
    assert fp.platform is not None and fp.platform.startswith(system[1])
    assert headers.get("sec-ch-ua-platform", system[2]) == system[2]
    assert fp.viewport is not None and 300 <= fp.viewport["height"] < fp.viewport["width"] * 2
    # what was generated is what a user could have posted
    again = parse_identity({"id": "x", "fingerprint": fp.to_dict()}).fingerprint
    assert again == fp


def test_many_draws_all_hold_together() -> None:
    """browserforge now and then draws a Mac User-Agent on a Linux platform, a Chrome
    without client hints or a phone's screen: those are drawn again."""
    for n in range(200):
        browser = BROWSERS[n % len(BROWSERS)]
        fp = fingerprint_for("US", browser)
        headers = dict(fp.request_headers())
        assert coherent(fp.user_agent, fp.platform or "", headers, 1024, browser), fp


def test_coherent_refuses_what_does_not_hold_together() -> None:
    mac = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) Chrome/131.0.0.0 Safari/537.36"
    hints = {"sec-ch-ua": '"Chromium";v="131"', "sec-ch-ua-platform": '"macOS"'}
    assert coherent(mac, "MacIntel", hints, 1440, "chrome")
    assert not coherent(mac, "Linux x86_64", hints, 1440, "chrome")  # another system
    assert not coherent(mac, "MacIntel", {**hints, "sec-ch-ua-platform": '"Linux"'}, 1440,
                        "chrome")  # fmt: skip
    assert not coherent(mac, "MacIntel", {"sec-ch-ua-platform": '"macOS"'}, 1440, "chrome")
    assert not coherent(mac, "MacIntel", hints, 393, "chrome")  # a phone's screen
    assert coherent(mac, "MacIntel", {}, 1440, "firefox")  # no client hints: fine


def test_accept_language_is_a_browsers() -> None:
    assert accept_language("en-US") == "en-US,en;q=0.9"
    assert accept_language("fr-FR") == "fr-FR,fr;q=0.9,en-US;q=0.8,en;q=0.7"


def test_unknown_country_or_browser_names_the_field() -> None:
    with pytest.raises(ContractValueError) as caught:
        fingerprint_for("XX", "chrome")
    assert caught.value.field == "country" and "DE" in caught.value.message
    with pytest.raises(ContractValueError) as caught:
        check_plan(count=1, countries=["FR", "Atlantis"])
    assert caught.value.field == "generate.countries.1"
    with pytest.raises(ContractValueError) as caught:
        check_plan(count=1, browsers=["chrome", "netscape"])
    assert caught.value.field == "generate.browsers.1"
    with pytest.raises(ContractValueError) as caught:
        check_plan(count=1, proxies=["http://a:1", "http://b:1"], countries=["DE", "FR", "US"])
    assert caught.value.field == "generate.countries"
    with pytest.raises(ContractValueError) as caught:
        check_plan(count=1, proxies=["http://a:1", "not a url"])
    assert caught.value.field == "generate.proxies.1"
    with pytest.raises(ContractValueError) as caught:
        check_plan(count=1, id_prefix="x" * 190)
    assert caught.value.field == "generate.id_prefix"


def test_a_plan_pairs_proxies_countries_and_browsers_round_robin() -> None:
    plan = check_plan(
        count=5,
        proxies=["http://{id}:pw@a.test:1", "http://b.test:1"],
        countries=["FR", "KR"],
        browsers=["firefox"],
        id_prefix="p-",
    )
    made = generate_identities(plan)
    assert len({i.id for i in made}) == 5 and all(i.id.startswith("p-") for i in made)
    for n, identity in enumerate(made):
        assert identity.fingerprint is not None
        if n % 2 == 0:
            assert identity.proxy == f"http://{identity.id}:pw@a.test:1"
            assert identity.fingerprint.timezone == "Europe/Paris"
        else:
            assert identity.proxy == "http://b.test:1"
            assert identity.fingerprint.timezone == "Asia/Seoul"
        assert "Firefox/" in identity.fingerprint.user_agent
    direct = generate_identities(check_plan(count=2))
    assert [i.proxy for i in direct] == [None, None]
    assert {i.fingerprint.locale for i in direct if i.fingerprint} == {"en-US"}


def test_without_browserforge_generation_is_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "browserforge.fingerprints", None)
    with pytest.raises(Unsupported) as caught:
        generate_identities(check_plan(count=1))
    assert "fleet-automation[identities]" in caught.value.message


def test_a_proxy_provider_makes_each_identitys_session_in_its_country() -> None:
    template = "http://user-{session}-cc-{country}:pw@proxy.test:8000"
    plan = check_plan(
        count=3,
        countries=["DE", "FR"],
        proxy_provider="template",
        proxy_provider_config={"template": template},
    )
    made = generate_identities(plan)
    for n, ident in enumerate(made):
        country = ("de", "fr")[n % 2]
        assert ident.proxy == f"http://user-{ident.id}-cc-{country}:pw@proxy.test:8000"
    with pytest.raises(ContractValueError) as both:
        check_plan(count=1, proxies=["http://a:1"], proxy_provider="template")
    assert both.value.field == "generate.proxy_provider"
    with pytest.raises(ContractValueError) as unknown:
        check_plan(count=1, proxy_provider="no-such-provider")
    assert unknown.value.field == "generate.proxy_provider" and "template" in unknown.value.message
    with pytest.raises(ContractValueError) as bad:
        check_plan(count=1, proxy_provider="template", proxy_provider_config={})
    assert bad.value.field == "generate.proxy_provider_config"
