"""The demo site's rules, as plain functions with an injected clock."""

from __future__ import annotations

import pytest

from fleet.dev.demo_state import DemoSettings, DemoState, pow_ok


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def answer(nonce: str, difficulty: int) -> int:
    return next(a for a in range(10**7) if pow_ok(nonce, a, difficulty))


@pytest.fixture
def clock() -> Clock:
    return Clock()


def state(clock: Clock, **settings: object) -> DemoState:
    return DemoState(DemoSettings(**settings), clock=clock)  # type: ignore[arg-type]


def test_a_right_answer_gives_a_cookie_bound_to_the_user_agent(clock: Clock) -> None:
    s = state(clock, difficulty=2)
    ch = s.new_challenge()
    cookie = s.solve(str(ch["challenge_id"]), answer(str(ch["nonce"]), 2), "UA-1")
    assert cookie is not None
    assert s.admit(cookie, "UA-1") is None
    assert s.admit(cookie, "UA-2") == "cookie from another user agent"
    assert s.admit(None, "UA-1") == "no valid clearance cookie"
    assert s.stats.challenges_solved == 1 and s.stats.pages_rejected == 2


def test_a_cookie_is_bound_to_the_exit_that_solved_the_challenge(clock: Clock) -> None:
    s = state(clock, difficulty=2, cookie_max_uses=2)
    ch = s.new_challenge()
    cookie = s.solve(str(ch["challenge_id"]), answer(str(ch["nonce"]), 2), "UA", "127.0.0.2")
    assert s.admit(cookie, "UA", "127.0.0.2") is None
    # The same cookie and User-Agent from another exit: the challenge again.
    assert s.admit(cookie, "UA", "127.0.0.3") == "cookie from another exit"
    assert s.admit(cookie, "UA-2", "127.0.0.3") == "cookie from another exit"
    assert s.admit(cookie, "UA-2", "127.0.0.2") == "cookie from another user agent"
    # Refusals charge no use: the cookie still has its second use at its own exit.
    assert s.admit(cookie, "UA", "127.0.0.2") is None
    assert s.admit(cookie, "UA", "127.0.0.2") == "clearance used up"
    assert (s.stats.rejected_other_exit, s.stats.rejected_other_user_agent) == (2, 1)
    assert s.stats.pages_rejected == 4


def test_a_wrong_answer_fails_and_burns_the_challenge(clock: Clock) -> None:
    s = state(clock, difficulty=2)
    ch = s.new_challenge()
    nonce = str(ch["nonce"])
    wrong = next(a for a in range(1000) if not pow_ok(nonce, a, 2))
    assert s.solve(str(ch["challenge_id"]), wrong, "UA") is None
    # Even the right answer is refused now: a challenge is answered once.
    assert s.solve(str(ch["challenge_id"]), answer(nonce, 2), "UA") is None
    assert s.stats.challenges_failed == 2


def test_challenges_and_cookies_expire(clock: Clock) -> None:
    s = state(clock, difficulty=1, challenge_ttl_seconds=10, cookie_ttl_seconds=60)
    late = s.new_challenge()
    clock.now += 11
    assert s.solve(str(late["challenge_id"]), answer(str(late["nonce"]), 1), "UA") is None
    ch = s.new_challenge()
    cookie = s.solve(str(ch["challenge_id"]), answer(str(ch["nonce"]), 1), "UA")
    clock.now += 59
    assert s.admit(cookie, "UA") is None
    clock.now += 2
    assert s.admit(cookie, "UA") == "clearance expired"


def test_a_cookie_is_used_up_after_max_uses(clock: Clock) -> None:
    s = state(clock, difficulty=1, cookie_max_uses=3)
    ch = s.new_challenge()
    cookie = s.solve(str(ch["challenge_id"]), answer(str(ch["nonce"]), 1), "UA")
    assert [s.admit(cookie, "UA") for _ in range(4)] == [None, None, None, "clearance used up"]


def test_broken_pages_always_fail_and_others_fail_at_the_configured_rate(clock: Clock) -> None:
    s = state(clock, failure_rate=0.1, broken_pages=frozenset({13}), seed=7)
    assert all(s.page_fails(13) for _ in range(50))
    failures = sum(s.page_fails(1) for _ in range(2000))
    assert 120 < failures < 280  # ~10 % of 2000
    assert not any(state(clock, failure_rate=0.0).page_fails(2) for _ in range(100))


def test_tokens_need_the_client_credentials_and_expire(clock: Clock) -> None:
    s = state(clock, token_ttl_seconds=30)
    assert s.issue_token("demo", "wrong") is None
    token = s.issue_token("demo", "demo-secret")
    assert token is not None and s.token_ok(token)
    clock.now += 31
    assert not s.token_ok(token)
    assert s.stats.tokens_issued == 1
    assert s.stock("A-1") == s.stock("A-1")  # stable per SKU
