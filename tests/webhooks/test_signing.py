"""The Standard Webhooks signature: checked against the spec's definition computed here
by hand, against the reference libraries' published vector, and the secret's form."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from fleet.webhooks.signing import key_of, looks_masked, masked, new_secret, sign, verify

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TIMESTAMP = 1614265330
BODY = b'{"test": 2432232314}'


def test_the_signature_is_the_specs_hmac_of_id_timestamp_and_body() -> None:
    # The spec: HMAC-SHA256 keyed by the base64-decoded part after whsec_, over
    # "{id}.{timestamp}.{body}", base64, after the version "v1,".
    key = base64.b64decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    content = b"msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330." + BODY
    by_hand = "v1," + base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode()
    assert sign(SECRET, MSG_ID, TIMESTAMP, BODY) == by_hand
    # the vector the Standard Webhooks reference libraries test with
    assert by_hand == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_any_part_changed_changes_the_signature() -> None:
    good = sign(SECRET, MSG_ID, TIMESTAMP, BODY)
    assert sign(SECRET, MSG_ID + "x", TIMESTAMP, BODY) != good
    assert sign(SECRET, MSG_ID, TIMESTAMP + 1, BODY) != good
    assert sign(SECRET, MSG_ID, TIMESTAMP, BODY + b" ") != good
    assert verify(SECRET, MSG_ID, TIMESTAMP, BODY, f"v1,bm9wZQ== {good}")
    assert not verify(SECRET, MSG_ID, TIMESTAMP, BODY + b" ", good)
    assert not verify(new_secret(), MSG_ID, TIMESTAMP, BODY, good)


def test_secrets_are_fresh_well_formed_and_masked() -> None:
    a, b = new_secret(), new_secret()
    assert a != b and a.startswith("whsec_") and len(key_of(a)) == 32
    shown = masked(a)
    assert shown.startswith("whsec_") and shown.endswith(a[-4:]) and a[6:-4] not in shown
    assert looks_masked(shown) and not looks_masked(a)


@pytest.mark.parametrize(
    "bad",
    [
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "whsec_not base64!",
        "whsec_" + "A" * 8,
        "whsec_" + "A" * 100,
    ],
)
def test_a_malformed_secret_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        key_of(bad)
