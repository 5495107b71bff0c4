"""The saved pages of ``tests/blocks/corpus`` (block, challenge and captcha pages of each
vendor; ordinary pages that look like them) served by a real local HTTP server with
their status and headers, fetched with httpx and classified as a worker does."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleet.core.blocks import MAX_BODY, OK, VENDORS, Classifier, Seen, Verdict, classify
from fleet.core.blocks.detectors.captchas import find_widget, sitekey
from fleet.core.blocks.detectors.common import parse_retry_after
from tests.support.sites import serving

CORPUS = Path(__file__).parent / "corpus"
PAGES: list[dict[str, Any]] = json.loads((CORPUS / "manifest.json").read_text())["pages"]
BY_FILE = {page["file"]: page for page in PAGES}
ORDINARY = [page for page in PAGES if page["kind"] == "ok"]


class CorpusSite(BaseHTTPRequestHandler):
    """``GET /<file>`` answers the saved page with the manifest's status and headers
    (each ``set-cookie`` its own header line), nothing added but the length."""

    def do_GET(self) -> None:
        page = BY_FILE[self.path.lstrip("/")]
        body = (CORPUS / page["file"]).read_bytes()
        self.send_response_only(page["status"])
        for name, value in page["headers"]:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with serving(CorpusSite) as url:
        yield url


async def fetched(url: str) -> Verdict:
    async with httpx.AsyncClient() as client:
        resp = await client.get(url)
    return classify(resp.status_code, resp.headers, resp.content, str(resp.url))


def test_the_corpus_covers_every_vendor_and_enough_ordinary_pages() -> None:
    files = {p.name for p in CORPUS.iterdir() if p.name != "manifest.json"}
    assert files == set(BY_FILE)
    assert {page["vendor"] for page in PAGES if page["kind"] != "ok"} == set(VENDORS)
    assert {page["kind"] for page in PAGES} == {
        "ok",
        "throttled",
        "blocked",
        "challenge",
        "captcha",
    }
    assert len(ORDINARY) >= 12


@pytest.mark.parametrize("file", sorted(BY_FILE))
async def test_corpus_page_is_classified_as_the_manifest_says(site: str, file: str) -> None:
    page = BY_FILE[file]
    verdict = await fetched(site + file)
    assert (verdict.kind, verdict.vendor) == (page["kind"], page["vendor"]), verdict
    assert verdict.sitekey == page.get("sitekey"), verdict
    assert verdict.retry_after == page.get("retry_after"), verdict
    assert verdict.ok or verdict.detail, "a block's verdict names its marker"


@pytest.mark.parametrize("file", [page["file"] for page in ORDINARY])
def test_no_ordinary_page_is_a_false_positive_wherever_it_is_served(file: str) -> None:
    """An ordinary page stays ``ok`` served through Cloudflare, behind DataDome, Akamai,
    PerimeterX or Imperva (their headers and cookies on every page of a protected site),
    and as bytes, text or with a 200 (a 404's or 500's page too)."""
    page = BY_FILE[file]
    body = (CORPUS / file).read_bytes()
    headers = [tuple(pair) for pair in page["headers"]]
    protected = [
        ("server", "cloudflare"),
        ("cf-ray", "8f0a1b2c3d4e5f60-AMS"),
        ("cf-cache-status", "DYNAMIC"),
        ("x-datadome", "protected"),
        ("x-iinfo", "3-1234567-1234568 NNNN CT(0 0 0)"),
        ("set-cookie", "datadome=abc; Path=/"),
        ("set-cookie", "_abck=AAAA~0~YAAQ; Path=/"),
        ("set-cookie", "_px3=abc; Path=/"),
        ("set-cookie", "visid_incap_1=abc; Path=/"),
    ]
    for status in {page["status"], 200}:
        for variant in (headers, headers + protected):
            assert classify(status, variant, body) is OK, (status, variant)
            assert classify(status, variant, body.decode()) is OK, (status, variant)


def test_a_marker_past_the_body_prefix_is_not_read() -> None:
    marker = '<div class="g-recaptcha" data-sitekey="6LcTEST"></div>'
    assert classify(403, {}, marker).kind == "captcha"
    assert classify(403, {}, " " * MAX_BODY + marker).vendor == "generic"


def test_retry_after_seconds_and_http_date() -> None:
    now = 1_765_000_000.0
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after(formatdate(now + 90, usegmt=True), now=now) == 90.0
    assert parse_retry_after(formatdate(now - 90, usegmt=True), now=now) == 0.0
    for unreadable in (None, "", "soon", "-5", "nan", "Mon, 99 Foo 2026 00:00:00 GMT"):
        assert parse_retry_after(unreadable) is None, unreadable


def test_a_429_says_how_long_in_either_form() -> None:
    in_a_minute = formatdate(time.time() + 60, usegmt=True)
    verdict = classify(429, {"Retry-After": in_a_minute}, b"slow down")
    assert verdict.kind == "throttled" and verdict.retry_after is not None
    assert 55 <= verdict.retry_after <= 60
    assert classify(429, {"retry-after": "7"}, "").retry_after == 7.0
    assert classify(429, {}, "").retry_after is None
    assert classify(503, {"Retry-After": "30"}, "").kind == "throttled"
    assert classify(503, {}, "").kind == "ok"


@pytest.mark.parametrize(
    ("html", "vendor", "key"),
    [
        ('<div data-sitekey="6LcA-b_c" class="g-recaptcha"></div>', "recaptcha", "6LcA-b_c"),
        (
            "<div class='g-recaptcha' data-theme='dark' data-sitekey='6LcSingle'></div>",
            "recaptcha",
            "6LcSingle",
        ),
        (
            '<script src="https://www.google.com/recaptcha/api.js?render=explicit"></script>'
            "<script>grecaptcha.render('box', {sitekey: '6LcRenderCall_0123'})</script>",
            "recaptcha",
            "6LcRenderCall_0123",
        ),
        (
            '<script src="https://www.google.com/recaptcha/api.js?render=6LcV3keyAAAAAAbbbbbbbbbb">'
            "</script>",
            "recaptcha",
            "6LcV3keyAAAAAAbbbbbbbbbb",
        ),
        (
            '<script src="https://js.hcaptcha.com/1/api.js?recaptchacompat=on"></script>'
            '<div class="g-recaptcha" data-sitekey="a5f74b19-9e45-40e0-b45d-47ff91b7a6c2"></div>',
            "hcaptcha",
            "a5f74b19-9e45-40e0-b45d-47ff91b7a6c2",
        ),
        (
            '<div class="h-captcha other" data-sitekey="10000000-ffff-ffff-ffff-000000000001">',
            "hcaptcha",
            "10000000-ffff-ffff-ffff-000000000001",
        ),
        ('<div class="cf-turnstile" data-sitekey="0x4AAAAAAAB"></div>', "turnstile", "0x4AAAAAAAB"),
        ('<script src="https://www.google.com/recaptcha/api.js"></script>', "recaptcha", None),
    ],
)
def test_sitekey_extraction(html: str, vendor: str, key: str | None) -> None:
    assert find_widget(html) == (vendor, key)
    verdict = classify(403, {}, f"<html><body>{html}</body></html>")
    assert (verdict.kind, verdict.vendor, verdict.sitekey) == ("captcha", vendor, key)


def test_the_key_of_the_widget_not_of_another_element() -> None:
    html = (
        '<div class="newsletter" data-sitekey="not-this-one"></div>'
        '<div class="cf-turnstile" data-sitekey="0x4Theirs"></div>'
    )
    assert sitekey(html, "cf-turnstile") == "0x4Theirs"
    assert sitekey(html) == "not-this-one"


def test_seen_reads_every_set_cookie_and_only_the_body_prefix() -> None:
    headers = httpx.Headers(
        [
            ("Set-Cookie", "a=1; Expires=Wed, 21 Oct 2026 07:28:00 GMT; Path=/"),
            ("Set-Cookie", "b=2"),
            ("X-Thing", "one"),
            ("x-thing", "two"),
        ]
    )
    seen = Seen.of(200, headers, b"\xff" + b"x" * (2 * MAX_BODY), "https://example.com/")
    assert seen.cookies == {"a", "b"}
    assert seen.headers["x-thing"] == "one, two"
    assert len(seen.body) == MAX_BODY and seen.body[0] == "\ufffd"
    # one header line folding several cookies (as some clients give them)
    folded = Seen.of(200, {"Set-Cookie": "a=1; Expires=Wed, 21 Oct 2026 07:28:00 GMT, c=3"}, "")
    assert folded.cookies == {"a", "c"}
    assert Seen.of(200, [("Set-Cookie", "d=4")], None).cookies == {"d"}


def test_a_detector_that_raises_is_skipped_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(seen: Seen) -> Verdict | None:
        raise RuntimeError("boom")

    classifier = Classifier(plugins=False, detectors=[broken, lambda seen: Verdict("blocked")])
    with caplog.at_level(logging.ERROR, logger="fleet.blocks"):
        for _ in range(3):
            assert classifier(200, {}, "").kind == "blocked"
    assert [r.getMessage() for r in caplog.records if "raised" in r.getMessage()] == [
        f"block detector {__name__}.{broken.__qualname__} raised; skipped"
    ]
    assert Classifier(plugins=False, detectors=[broken])(403, {}, "") is OK


def test_markers_without_their_usual_headers() -> None:
    """A proxy may drop a vendor's headers: a small incident page is still Imperva's; a
    Kasada header on a 404 (a verified request's answer) is not a challenge."""
    incident = (CORPUS / "imperva_incident.html").read_bytes()
    verdict = classify(200, {"content-type": "text/html"}, incident)
    assert (verdict.kind, verdict.vendor) == ("blocked", "imperva")
    assert classify(404, {"x-kpsdk-ct": "0aBc"}, b"not found").kind == "ok"
    assert classify(403, {"x-kpsdk-ct": "0aBc"}, b"").vendor == "kasada"
