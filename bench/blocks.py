"""The block classifier's cost per response (a script, not a test).

For each kind of response: the median, over several rounds, of the time one
``classify(status, headers, body, url)`` takes (µs), as a worker calls it after every
request (the headers an ``httpx.Headers``, the body bytes), with the built-in detectors
alone and with a type's three ``block_rules`` (a status rule, a header rule and a body
pattern, which RE2 searches in every 200's body).

    .venv/bin/python bench/blocks.py [--calls 2000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_HELP, loadavg

from fleet.core.blocks import BlockRule, Classifier, classifier_for, classify

HEADERS = [
    ("content-type", "text/html; charset=utf-8"),
    ("server", "nginx"),
    ("date", "Mon, 07 Dec 2026 16:00:00 GMT"),
    ("cache-control", "private, max-age=0"),
    ("vary", "Accept-Encoding"),
    ("set-cookie", "session=ab12cd34ef56; Path=/; HttpOnly; Secure"),
    ("set-cookie", "consent=1; Path=/; Max-Age=31536000"),
    ("strict-transport-security", "max-age=31536000"),
]
PARAGRAPH = (
    "<p>City officials on Tuesday approved a plan to rebuild the harbour front, ending a "
    "decade of debate over how the old docks should be used. Résumé: the council voted "
    '31 to 12. <a href="/city/harbour">More on the harbour</a></p>\n'
)


def page(size: int) -> bytes:
    head = "<!DOCTYPE html><html><head><title>Harbour plan | The Daily Example</title></head><body>"
    body = head + PARAGRAPH * (size // len(PARAGRAPH) + 1)
    return (body[: size - 14] + "</body></html>").encode()


CHALLENGE = (
    b'<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title></head><body>'
    b'<div id="challenge-stage"></div><script>(function(){window._cf_chl_opt={cvId: "3",'
    b"cType: 'managed',cRay: '8e2a1b3c4d5e6f70'};}());</script></body></html>"
)
#: name -> (status, headers, body)
CASES: dict[str, tuple[int, list[tuple[str, str]], bytes]] = {
    "ordinary 5 KB page": (200, HEADERS, page(5 * 1024)),
    "ordinary 100 KB page": (200, HEADERS, page(100 * 1024)),
    "JSON answer": (
        200,
        [("content-type", "application/json"), ("server", "nginx")],
        b'{"data": [' + b", ".join(b'{"id": %d, "name": "item"}' % i for i in range(60)) + b"]}",
    ),
    "Cloudflare challenge": (
        403,
        [
            ("content-type", "text/html"),
            ("server", "cloudflare"),
            ("cf-ray", "8e2a1b3c4d5e6f70-FRA"),
            ("cf-mitigated", "challenge"),
        ],
        CHALLENGE,
    ),
    "Cloudflare challenge, no cf-mitigated": (
        403,
        [("content-type", "text/html"), ("server", "cloudflare"), ("cf-ray", "8e2a1b3c4d5e6f70")],
        CHALLENGE,
    ),
    "403 generic": (
        403,
        [("content-type", "text/html"), ("server", "nginx")],
        b"<h1>Forbidden</h1>",
    ),
}
RULES = [
    BlockRule(kind="ok", status=[403], body='"login_required"'),
    BlockRule(kind="throttled", vendor="queue", header="x-queue", header_pattern=r"^position="),
    BlockRule(kind="throttled", vendor="queue", status=[200], body="(?i)you are in line"),
]


def per_call_us(classifier: Classifier, case: str, calls: int, rounds: int) -> float:
    status, pairs, body = CASES[case]
    headers = httpx.Headers(pairs)
    url = "https://news.example.com/city/harbour"
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            classifier(status, headers, body, url)
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=15, help="rounds (the median is shown)")
    parser.add_argument("--smoke", "--quick", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    calls, rounds = (50, 3) if args.smoke else (args.calls, args.rounds)

    plain = classifier_for(None)
    ruled = classifier_for(RULES)
    for name, (status, pairs, body) in CASES.items():  # the table says what each case is
        verdict = classify(status, pairs, body)
        print(f"{name}: {verdict.kind}" + (f" by {verdict.vendor}" if verdict.vendor else ""))
    print(f"\n{calls:,} calls x {rounds} rounds, median µs per response (load {loadavg()})\n")
    print("| response | built-in detectors | + 3 block_rules |")
    print("|---|---:|---:|")
    for name in CASES:
        alone = per_call_us(plain, name, calls, rounds)
        with_rules = per_call_us(ruled, name, calls, rounds)
        print(f"| {name} | {alone:.1f} | {with_rules:.1f} |")


if __name__ == "__main__":
    main()
