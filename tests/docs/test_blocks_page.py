"""The Verdicts and Detectors sections of docs/blocks.md run as written: each python
block executes and computes what its comment shows; the JSON config's rules validate
and classify like the Python ones; the pyproject snippet names the example detector."""

from __future__ import annotations

import contextlib
import io
import json
import tomllib
from pathlib import Path
from typing import Any

from fleet.core.blocks import BlockRule, Seen, classifier_for
from tests.docs.blocks import Block, fenced_blocks, section

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "blocks.md").read_text(encoding="utf-8")
VERDICTS = fenced_blocks(section(PAGE, "## Verdicts"))
DETECTORS = fenced_blocks(section(PAGE, "## Detectors"))


def run(block: Block) -> tuple[dict[str, Any], str]:
    """The block's globals after it ran, and what it printed."""
    scope: dict[str, Any] = {"__name__": "docs_blocks"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.text, "docs/blocks.md", "exec"), scope)
    return scope, out.getvalue()


def shown(block: Block) -> str:
    """What the block's ``print`` line says it prints (its ``# …`` comment)."""
    line = next(line for line in block.text.splitlines() if line.startswith("print("))
    return line.split("  # ", 1)[1]


def of(blocks: list[Block], lang: str) -> list[Block]:
    return [block for block in blocks if block.lang == lang]


def test_the_sections_hold_the_blocks_this_test_runs() -> None:
    assert len(of(VERDICTS, "python")) == 1
    assert [b.lang for b in DETECTORS] == ["json", "python", "toml", "python"]


def test_the_verdicts_example_classifies_a_challenge_and_an_ordinary_page() -> None:
    (block,) = of(VERDICTS, "python")
    scope, printed = run(block)
    verdict = scope["verdict"]
    assert (verdict.kind, verdict.vendor, verdict.detail) == (
        "challenge",
        "cloudflare",
        "cf-mitigated: challenge",
    )
    assert scope["ordinary"].ok
    assert printed.strip() == shown(block)


def test_the_rules_example_runs_and_the_json_rules_are_the_same_rules() -> None:
    config_block, rules_block, _, _ = DETECTORS
    scope, printed = run(rules_block)
    assert printed.strip() == shown(rules_block) == "ok throttled 60.0 blocked"
    config = json.loads(config_block.text)
    assert config["block_detection"] is True
    from_json = [BlockRule.model_validate(rule) for rule in config["block_rules"]]
    # the Python block's two rules are the JSON's first two, field for field
    assert [r.model_dump() for r in from_json[:2]] == [r.model_dump() for r in scope["rules"]]
    classifier = classifier_for(from_json)
    assert classifier(403, {}, b'{"error": "login_required"}').ok
    assert classifier(200, {"x-queue-position": "12"}, b"").retry_after == 60
    rejected = classifier(200, {}, b"<html><title>Request Rejected</title></html>")
    assert (rejected.kind, rejected.vendor) == ("blocked", "shieldwall")


def test_the_plugin_example_is_the_entry_point_it_declares() -> None:
    _, _, toml_block, plugin_block = DETECTORS
    points = tomllib.loads(toml_block.text)["project"]["entry-points"]["fleet.block_detectors"]
    (target,) = points.values()
    module, _, attr = target.partition(":")
    scope, printed = run(plugin_block)
    detect = scope[attr]
    assert printed.startswith("Verdict(kind='blocked', vendor='shieldwall'")
    challenge = detect(Seen.of(403, {"x-shieldwall-incident": "b2"}, "<div id='sw-challenge'>"))
    assert (challenge.kind, challenge.detail) == ("challenge", "Shieldwall challenge (incident b2)")
    assert detect(Seen.of(403, {}, "sw-challenge")) is None
    assert detect(Seen.of(200, {"x-shieldwall-incident": "b2"}, "")) is None
    assert module == "shieldwall_fleet"
