"""``demo-pow``: the demo site's proof-of-work challenge, as a Fleet solver
(docs/blocks.md#solvers).

The site answers a protected page without a clearance with a 403 ``challenge
required``; the type's ``block_rules`` make that a ``challenge`` verdict, and
``ctx.solve`` (or the worker, for one left uncaught) hands it here. The answer goes
out through the client that met the challenge — the identity's exit and User-Agent,
which the site binds the clearance to — and the clearance cookie lands in its jar.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any
from urllib.parse import urlsplit

from fleet.core.access.solvers import Solution
from fleet.core.blocks import Challenge

#: The most hashes tried before giving up (difficulty 3 needs ~4,000).
MAX_HASHES = 50_000_000


def answer(nonce: str, difficulty: int, limit: int = MAX_HASHES) -> int | None:
    """The smallest answer whose ``sha256("<nonce>:<answer>")`` starts with
    ``difficulty`` zeros, or None below ``limit``."""
    prefix = "0" * difficulty
    for n in range(limit):
        if hashlib.sha256(f"{nonce}:{n}".encode()).hexdigest().startswith(prefix):
            return n
    return None


class DemoPowSolver:
    """Solves the demo site's challenge at ``challenge_url`` (config; ``{site}`` is the
    challenged page's ``host:port``)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.challenge_url = str(config.get("challenge_url") or "http://{site}/challenge")

    async def solve(self, challenge: Challenge) -> Solution | None:
        http = challenge.client
        if http is None:  # met by a browser: this solver answers over HTTP only
            return None
        url = self.challenge_url.format(site=urlsplit(challenge.url).netloc)
        asked = (await http.get(url, extensions={"fleet_classify": False})).json()
        found = await asyncio.to_thread(answer, asked["nonce"], int(asked["difficulty"]))
        if found is None:
            return None
        sent = await http.post(
            url,
            json={"challenge_id": asked["challenge_id"], "answer": found},
            extensions={"fleet_classify": False},
        )
        if sent.status_code != 200:
            return None
        # The clearance is in the client's jar already; named here so the identity keeps it.
        return Solution(
            cookies=[
                {"name": c.name, "value": c.value or "", "domain": c.domain, "path": c.path}
                for c in http.cookies.jar
            ]
        )
