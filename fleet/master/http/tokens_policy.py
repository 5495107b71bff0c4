"""What tokens a master accepts to start with: none shorter than 16 characters
(a short token is guessed; the gate's throttle only slows guessing down)."""

from __future__ import annotations

from fleet.settings import Settings

#: The shortest token a master starts with.
MIN_TOKEN_LENGTH = 16


def weak_tokens(settings: Settings) -> str | None:
    """A message naming every configured token that is too short (never the token
    itself), or None if all are long enough."""
    problems: list[str] = []
    if settings.admin_token is not None and len(settings.admin_token) < MIN_TOKEN_LENGTH:
        problems.append(f"FLEET_ADMIN_TOKEN has {len(settings.admin_token)} characters")
    short = [i for i, t in enumerate(settings.read_tokens, 1) if len(t) < MIN_TOKEN_LENGTH]
    if short:
        problems.append(f"FLEET_READ_TOKENS entries {', '.join(map(str, short))} are too short")
    scoped = sum(1 for t in settings.token_scopes if len(t) < MIN_TOKEN_LENGTH)
    if scoped:
        problems.append(f"{scoped} token(s) of FLEET_TOKEN_SCOPES are too short")
    if not problems:
        return None
    return (
        "; ".join(problems)
        + f": every token must have at least {MIN_TOKEN_LENGTH} characters (e.g. "
        "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
    )
