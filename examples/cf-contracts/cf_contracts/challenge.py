"""The site's challenge as both plugins meet it: the harvester earns clearances ahead,
the scraper earns one when an identity of its own is challenged.

A protected page answers 403 with ``{"error": "challenge required", "reason": ...}``;
``GET <challenge_url>`` hands out a nonce and a difficulty; the answer whose
``sha256("<nonce>:<answer>")`` starts with that many hex zeros, ``POST``ed back, earns
the ``cf_clearance`` cookie. The site binds it to the exit (client address) and the
User-Agent that solved the challenge: earn it through the client that will use it.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

CLEARANCE_COOKIE = "cf_clearance"


class ChallengeFailed(RuntimeError):
    """The site did not accept our answer (raise: the task is retried)."""


def solve_challenge(nonce: str, difficulty: int, limit: int = 50_000_000) -> int:
    """The smallest answer whose ``sha256("<nonce>:<answer>")`` starts with
    ``difficulty`` hex zeros.

    Raises:
        ChallengeFailed: If no answer below ``limit`` works.
    """
    prefix = "0" * difficulty
    for answer in range(limit):
        if hashlib.sha256(f"{nonce}:{answer}".encode()).hexdigest().startswith(prefix):
            return answer
    raise ChallengeFailed(f"no answer below {limit} at difficulty {difficulty}")


async def earn_clearance(http: httpx.AsyncClient, challenge_url: str) -> httpx.Response:
    """Solve the challenge with ``http``: its exit and its User-Agent earn the cookie,
    which lands in its jar. Returns the site's answer (``expires_in``: the cookie's life).

    Raises:
        ChallengeFailed: The answer was refused.
        httpx.HTTPError: The site could not be reached or answered with an error.
    """
    challenge = (await http.get(challenge_url)).raise_for_status().json()
    # Hashing is CPU work: keep it off the loop so other slots stay responsive.
    answer = await asyncio.to_thread(
        solve_challenge, challenge["nonce"], int(challenge["difficulty"])
    )
    response = await http.post(
        challenge_url, json={"challenge_id": challenge["challenge_id"], "answer": answer}
    )
    if response.status_code == 403:
        raise ChallengeFailed(f"{challenge_url} refused the answer: {response.text[:200]}")
    return response.raise_for_status()


def challenge_reason(response: httpx.Response) -> str | None:
    """Why the site challenged this request (``"cookie from another exit"``...), or
    None if the response is not the challenge."""
    if response.status_code != 403:
        return None
    try:
        body = response.json()
    except ValueError:
        return "403"
    return str(body.get("reason") or "403") if isinstance(body, dict) else "403"


def has_clearance(cookies: Iterable[Mapping[str, Any]], host: str, margin: float = 5.0) -> bool:
    """Whether a jar (``storage_state`` cookies, an identity's) holds a clearance for
    ``host`` that lives ``margin`` seconds more (it may still be used up: the site says)."""
    now = time.time()
    return any(
        c.get("name") == CLEARANCE_COOKIE
        and str(c.get("domain", "")).lstrip(".") == host
        and (float(c.get("expires", -1)) < 0 or float(c.get("expires", -1)) > now + margin)
        for c in cookies
    )
