"""The demo site's state and rules, as plain objects (no I/O, no event loop).

The demo site imitates a site behind a bot challenge: a visitor solves a small
proof-of-work, gets an expiring clearance cookie bound to the exit (the client
address) and the user agent that solved it, and may then read protected pages from
that exit with that user agent until the cookie expires or is used up. It also
hands out short-lived API tokens for the inventory example.
"""

from __future__ import annotations

import hashlib
import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

CLEARANCE_COOKIE = "cf_clearance"


@dataclass(frozen=True)
class DemoSettings:
    """How the demo site behaves.

    Attributes:
        difficulty: Leading hex zeros the proof-of-work hash needs (3 = ~4k hashes).
        challenge_ttl_seconds: How long a handed-out challenge can be answered.
        cookie_ttl_seconds: Lifetime of a clearance cookie.
        cookie_max_uses: Protected pages one cookie may read before the site
            rejects it (so cookies burn and the pool needs refilling).
        failure_rate: Share of protected page reads that fail with a 500.
        broken_pages: Product pages that always fail with a 500 (dead letters).
        pages: Number of product pages (``/products/1`` .. ``/products/<pages>``).
        token_ttl_seconds: Lifetime of an API access token.
        client_id / client_secret: The API's one set of client credentials.
        seed: Seed of the failure dice (None: random).
    """

    difficulty: int = 3
    challenge_ttl_seconds: float = 60.0
    cookie_ttl_seconds: float = 300.0
    cookie_max_uses: int = 25
    failure_rate: float = 0.1
    broken_pages: frozenset[int] = frozenset({13, 42, 77})
    pages: int = 100
    token_ttl_seconds: float = 30.0
    client_id: str = "demo"
    client_secret: str = "demo-secret"
    seed: int | None = None


def pow_hash(nonce: str, answer: int) -> str:
    """The hash a challenge answer is judged by."""
    return hashlib.sha256(f"{nonce}:{answer}".encode()).hexdigest()


def pow_ok(nonce: str, answer: int, difficulty: int) -> bool:
    """True if ``answer`` solves the challenge ``nonce`` at ``difficulty``."""
    return pow_hash(nonce, answer).startswith("0" * difficulty)


@dataclass
class Clearance:
    """One clearance cookie the site handed out, bound to who earned it.

    Attributes:
        user_agent: The User-Agent that solved the challenge.
        expires_at: When the cookie stops working.
        uses: Protected pages read with it so far.
        client: The address the challenge was solved from (the exit).
    """

    user_agent: str
    expires_at: float
    uses: int = 0
    client: str = ""


@dataclass
class Stats:
    """What happened so far (served on ``/stats``)."""

    challenges_issued: int = 0
    challenges_solved: int = 0
    challenges_failed: int = 0
    pages_served: int = 0
    pages_failed: int = 0
    pages_rejected: int = 0
    rejected_other_exit: int = 0
    rejected_other_user_agent: int = 0
    tokens_issued: int = 0
    stock_served: int = 0


@dataclass
class DemoState:
    """Everything the demo site remembers, with the rules as methods.

    Args:
        settings: The behaviour knobs.
        clock: Returns the current time (seconds); injectable for tests.
    """

    settings: DemoSettings = field(default_factory=DemoSettings)
    clock: Callable[[], float] = time.time
    challenges: dict[str, tuple[str, float]] = field(default_factory=dict)
    clearances: dict[str, Clearance] = field(default_factory=dict)
    tokens: dict[str, float] = field(default_factory=dict)
    stats: Stats = field(default_factory=Stats)

    def __post_init__(self) -> None:
        self._dice = random.Random(self.settings.seed)

    def new_challenge(self) -> dict[str, object]:
        """Hand out a challenge: ``{challenge_id, nonce, difficulty, expires_in}``."""
        self._forget_expired()
        challenge_id, nonce = secrets.token_hex(8), secrets.token_hex(16)
        ttl = self.settings.challenge_ttl_seconds
        self.challenges[challenge_id] = (nonce, self.clock() + ttl)
        self.stats.challenges_issued += 1
        return {
            "challenge_id": challenge_id,
            "nonce": nonce,
            "difficulty": self.settings.difficulty,
            "expires_in": ttl,
        }

    def solve(
        self, challenge_id: str, answer: int, user_agent: str, client: str = ""
    ) -> str | None:
        """Check an answer; the new clearance cookie value, or None if wrong/expired.

        A challenge can be answered once, right or wrong. The cookie is bound to
        ``user_agent`` and to ``client``, the address the answer came from.
        """
        entry = self.challenges.pop(challenge_id, None)
        if (
            entry is None
            or entry[1] < self.clock()
            or not pow_ok(entry[0], answer, self.settings.difficulty)
        ):
            self.stats.challenges_failed += 1
            return None
        value = secrets.token_urlsafe(24)
        expires_at = self.clock() + self.settings.cookie_ttl_seconds
        self.clearances[value] = Clearance(
            user_agent=user_agent, expires_at=expires_at, client=client
        )
        self.stats.challenges_solved += 1
        return value

    def admit(self, cookie: str | None, user_agent: str, client: str = "") -> str | None:
        """Charge one use of a clearance cookie; None if admitted, else why not.

        A cookie sent from another address than the one that solved its challenge
        (``client``: another exit) or with another User-Agent is refused, as a site
        behind a bot challenge refuses a cookie that moved.
        """
        clearance = self.clearances.get(cookie or "")
        reason = None
        if clearance is None:
            reason = "no valid clearance cookie"
        elif clearance.expires_at < self.clock():
            reason = "clearance expired"
        elif clearance.client != client:
            reason = "cookie from another exit"
        elif clearance.user_agent != user_agent:
            reason = "cookie from another user agent"
        elif clearance.uses >= self.settings.cookie_max_uses:
            reason = "clearance used up"
        if reason is not None:
            self.stats.pages_rejected += 1
            if reason == "cookie from another exit":
                self.stats.rejected_other_exit += 1
            elif reason == "cookie from another user agent":
                self.stats.rejected_other_user_agent += 1
            return reason
        assert clearance is not None
        clearance.uses += 1
        return None

    def page_fails(self, page: int) -> bool:
        """Whether reading product ``page`` fails this time (always for broken pages)."""
        failed = page in self.settings.broken_pages or self._dice.random() < (
            self.settings.failure_rate
        )
        if failed:
            self.stats.pages_failed += 1
        else:
            self.stats.pages_served += 1
        return failed

    def issue_token(self, client_id: str, client_secret: str) -> str | None:
        """A new API access token, or None for wrong credentials."""
        s = self.settings
        if not (
            secrets.compare_digest(client_id, s.client_id)
            and secrets.compare_digest(client_secret, s.client_secret)
        ):
            return None
        self._forget_expired()
        token = secrets.token_urlsafe(24)
        self.tokens[token] = self.clock() + s.token_ttl_seconds
        self.stats.tokens_issued += 1
        return token

    def token_ok(self, token: str) -> bool:
        """True if ``token`` is a live access token."""
        expires_at = self.tokens.get(token)
        return expires_at is not None and expires_at >= self.clock()

    def stock(self, sku: str) -> int:
        """The (made-up, stable) stock level of ``sku``."""
        self.stats.stock_served += 1
        return int(hashlib.sha256(sku.encode()).hexdigest()[:4], 16) % 500

    def _forget_expired(self) -> None:
        now = self.clock()
        for key in [k for k, c in self.clearances.items() if c.expires_at < now]:
            del self.clearances[key]
        for key in [k for k, (_, exp) in self.challenges.items() if exp < now]:
            del self.challenges[key]
        for key in [k for k, exp in self.tokens.items() if exp < now]:
            del self.tokens[key]
