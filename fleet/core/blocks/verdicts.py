"""What a response says about access: a :class:`Verdict`, and :class:`Blocked`, the
error a classified block raises in a task (docs/blocks.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

from fleet.core.errors import FleetError

#: What a response is, for access:
#:
#: - ``ok``: the page the request asked for.
#: - ``throttled``: slow down (429, a 503 with ``Retry-After``); ``retry_after`` says how long.
#: - ``blocked``: refused (an access-denied page, a ban).
#: - ``challenge``: an interstitial to get past (a JavaScript check, "Press & Hold").
#: - ``captcha``: a puzzle for a person (reCAPTCHA, hCaptcha, Turnstile).
VerdictKind = Literal["ok", "throttled", "blocked", "challenge", "captcha"]
VERDICT_KINDS: Final[tuple[VerdictKind, ...]] = (
    "ok",
    "throttled",
    "blocked",
    "challenge",
    "captcha",
)
#: The kinds that count toward a domain's escalation to the next proxy tier.
ESCALATING: Final[frozenset[str]] = frozenset({"blocked", "challenge", "captcha"})
#: The vendors the built-in detectors name (a plugin's detector may name others).
VENDORS: Final[tuple[str, ...]] = (
    "cloudflare",
    "datadome",
    "perimeterx",
    "akamai",
    "imperva",
    "kasada",
    "recaptcha",
    "hcaptcha",
    "turnstile",
    "generic",
)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a response is, for access.

    Attributes:
        kind: ``ok``, ``throttled``, ``blocked``, ``challenge`` or ``captcha``.
        vendor: Who answered (``cloudflare``, ``datadome``…, ``generic``); None for ``ok``.
        detail: A short sentence naming the marker that decided it.
        retry_after: ``throttled``: seconds the site asked for (None: it did not say).
        sitekey: ``captcha``/``challenge``: the widget's site key, when the page has one.
    """

    kind: VerdictKind = "ok"
    vendor: str | None = None
    detail: str = ""
    retry_after: float | None = None
    sitekey: str | None = None

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "vendor": self.vendor,
            "detail": self.detail,
            "retry_after": self.retry_after,
            "sitekey": self.sitekey,
        }


#: The verdict of an ordinary page (shared: classifying an ``ok`` allocates nothing).
OK: Final = Verdict()


@dataclass(slots=True)
class Challenge:
    """A challenge met on the way to a page, for a solver (``ctx.solve``).

    Attributes:
        kind: ``challenge`` or ``captcha``.
        vendor: As the verdict named it.
        url: The page that answered with it.
        sitekey: The widget's site key, when the page has one.
        page: The browser page that met it (Playwright), when a browser did.
        body: The challenge page's text (its first 64 KiB), when an HTTP client met it.
        headers: The response headers (lower-case names).
        client: The ``httpx.AsyncClient`` that met it, when one did: a solver that
            answers through it answers from the same exit, with the same headers, and
            what the site sets lands in its jar (an identity's: saved at release).
    """

    kind: VerdictKind
    vendor: str | None
    url: str
    sitekey: str | None = None
    page: Any = None
    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    client: Any = None


class Blocked(FleetError):
    """A response was classified as other than ``ok`` (raised by the clients of
    ``ctx.http()``, ``ctx.identity.http()`` and ``ctx.check(page)``).

    Left uncaught in ``run_one``, the worker cools the identity and its proxy, counts
    the verdict for the type, domain and proxy tier, and sends the task back without
    charging an attempt (after ``retry_after`` for ``throttled``). Catch it to decide
    otherwise.

    Attributes:
        verdict: What the classifier said.
        url: The request's URL.
        domain: Its host.
        tier: The proxy tier it went through (its name; None without ``proxy_tiers``).
        challenge: The :class:`Challenge` to hand ``ctx.solve`` (``challenge``/``captcha``).
        proxy: The exit the request left through (None: direct); it is reported bad.
        identity: The identity of a proxy tier of identities the request went out as
            (None: the task's own, ``ctx.identity``); the worker cools it.
    """

    def __init__(
        self,
        verdict: Verdict,
        url: str = "",
        *,
        domain: str | None = None,
        tier: str | None = None,
        challenge: Challenge | None = None,
        proxy: str | None = None,
        identity: Any = None,
        automation_type: str | None = None,
        task_id: str | None = None,
    ) -> None:
        where = f" at {url}" if url else ""
        by = f" by {verdict.vendor}" if verdict.vendor else ""
        detail = f": {verdict.detail}" if verdict.detail else ""
        super().__init__(
            f"{verdict.kind}{by}{where}{detail}", automation_type=automation_type, task_id=task_id
        )
        self.verdict = verdict
        self.url = url
        self.domain = domain
        self.tier = tier
        self.challenge = challenge
        self.proxy = proxy
        self.identity = identity

    @property
    def retry_after(self) -> float | None:
        return self.verdict.retry_after
