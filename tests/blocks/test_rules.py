"""A type's ``block_rules``: validation (RE2 patterns, at least one condition), their
place before every other detector, and the cache of :func:`classifier_for`."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from fleet.core.blocks import OK, BlockRule, Classifier, classifier_for, classify
from fleet.core.blocks.classifier import CACHED_RULE_SETS
from fleet.core.blocks.rules import rule_detector
from fleet.core.blocks.seen import Seen

CHALLENGE = "<html><head><title>Just a moment...</title></head><body>…</body></html>"
CF = {"server": "cloudflare", "cf-ray": "8f0a1b2c3d4e5f60-AMS"}


@pytest.mark.parametrize("field", ["body", "header_pattern"])
def test_a_pattern_re2_cannot_compile_is_refused_naming_the_field(field: str) -> None:
    given = {"kind": "blocked", "header": "x-thing", field: "(a+"}
    with pytest.raises(ValidationError) as caught:
        BlockRule.model_validate(given)
    assert [error["loc"] for error in caught.value.errors()] == [(field,)]
    assert "RE2" in str(caught.value)


def test_a_backtracking_only_pattern_is_refused() -> None:
    """RE2 has no back-references: a rule cannot make a worker backtrack on a body."""
    with pytest.raises(ValidationError, match="body"):
        BlockRule(kind="blocked", body=r"(a)\1")


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"kind": "blocked"}, "at least one of status, header, body"),
        ({"kind": "blocked", "detail": "x"}, "at least one of status, header, body"),
        ({"kind": "blocked", "body": "x", "header_pattern": "y"}, "header_pattern needs header"),
        ({"kind": "banned", "status": [403]}, "kind"),
        ({"kind": "blocked", "status": [99]}, "status"),
        ({"kind": "blocked", "status": [600]}, "status"),
        ({"kind": "blocked", "status": [403], "vendor": ""}, "vendor"),
        ({"kind": "blocked", "status": [403], "vendor": "v" * 41}, "vendor"),
        ({"kind": "blocked", "status": [403], "detail": "d" * 201}, "detail"),
        ({"kind": "throttled", "status": [429], "retry_after": -1}, "retry_after"),
        ({"kind": "blocked", "status": [403], "statuses": [403]}, "statuses"),
    ],
)
def test_invalid_rules_are_refused(given: dict[str, object], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        BlockRule.model_validate(given)


def test_rules_win_over_built_in_detectors() -> None:
    rules = [BlockRule(kind="blocked", vendor="acme-waf", status=[403], body="Just a moment")]
    verdict = classifier_for(rules)(403, CF, CHALLENGE)
    assert (verdict.kind, verdict.vendor) == ("blocked", "acme-waf")
    assert verdict.detail == "block rule: status 403, body ~ /Just a moment/"
    assert classify(403, CF, CHALLENGE).vendor == "cloudflare"  # without the rule


def test_a_kind_ok_rule_whitelists_a_403() -> None:
    """A site's 403 that means "log in first" is the task's business, not a block."""
    login = '{"error": "login_required"}'
    rules = [BlockRule(kind="ok", status=[403], body='"login_required"', detail="not logged in")]
    assert classify(403, {}, login).kind == "blocked"
    verdict = classifier_for(rules)(403, {}, login)
    assert verdict.ok and verdict.vendor is None and verdict.detail == "not logged in"
    assert classifier_for(rules)(403, {}, "<h1>Forbidden</h1>").kind == "blocked"
    assert classifier_for([BlockRule(kind="ok", status=[403])])(403, {}, "") is OK


def test_every_condition_must_match_and_header_pattern_searches_the_value() -> None:
    rule = BlockRule(
        kind="throttled",
        vendor="shopwall",
        status=[200],
        header="X-Queue",  # any case: names are compared lower-case
        header_pattern=r"^position=\d+",
        body="(?i)you are in line",
    )
    detect = rule_detector(rule)
    page = "<h1>You are in line</h1>"
    assert detect(Seen.of(200, {"x-queue": "position=12"}, page)) is not None
    assert detect(Seen.of(200, {"x-queue": "position=12"}, "<h1>Welcome</h1>")) is None
    assert detect(Seen.of(200, {"x-queue": "done"}, page)) is None
    assert detect(Seen.of(200, {}, page)) is None
    assert detect(Seen.of(503, {"x-queue": "position=12"}, page)) is None


def test_a_rule_verdict_carries_retry_after_and_sitekey() -> None:
    fixed = BlockRule(kind="throttled", status=[200], body="come back later", retry_after=600)
    from_header = BlockRule(kind="throttled", status=[200], body="come back later")
    assert classifier_for([fixed])(200, {"retry-after": "5"}, "come back later").retry_after == 600
    assert (
        classifier_for([from_header])(200, {"retry-after": "5"}, "come back later").retry_after == 5
    )
    captcha = BlockRule(kind="captcha", vendor="acme", body="acme-check")
    page = '<div class="acme-check" data-sitekey="acme-key-1"></div>'
    assert classifier_for([captcha])(200, {}, page).sitekey == "acme-key-1"


def test_the_first_matching_rule_wins() -> None:
    rules = [
        BlockRule(kind="challenge", vendor="first", status=[403]),
        BlockRule(kind="blocked", vendor="second", status=[403]),
    ]
    assert classifier_for(rules)(403, {}, "").vendor == "first"
    assert classifier_for(list(reversed(rules)))(403, {}, "").vendor == "second"


def test_classifier_for_caches_by_the_rules_json() -> None:
    rules = [BlockRule(kind="blocked", status=[418])]
    same = [BlockRule.model_validate_json(rules[0].model_dump_json())]
    assert classifier_for(rules) is classifier_for(same)
    assert classifier_for([BlockRule(kind="blocked", status=[419])]) is not classifier_for(rules)
    assert classifier_for(None) is classifier_for([])  # the default classifier
    assert isinstance(classifier_for(None), Classifier)
    first = classifier_for(rules)
    for status in range(420, 420 + CACHED_RULE_SETS):  # the small LRU forgets the oldest
        classifier_for([BlockRule(kind="blocked", status=[status])])
    assert classifier_for(rules) is not first


def test_a_rule_list_is_one_detector_before_the_built_in_ones() -> None:
    classifier = Classifier([BlockRule(kind="blocked", status=[418])], plugins=False)
    assert classifier.detectors[0].__name__ == "block_rules[1]"
    assert classifier(418, {}, "").kind == "blocked"
    assert classifier(200, {}, "") is OK
