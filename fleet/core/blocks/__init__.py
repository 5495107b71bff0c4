"""Block detection: what a response says about access (docs/blocks.md).

:func:`classify` reads a response (status, headers, body) and answers a :class:`Verdict`:
``ok``, ``throttled``, ``blocked``, ``challenge`` or ``captcha``, with the vendor that
answered. :func:`classifier_for` gives the classifier of a type's ``block_rules``.
:class:`BlockRule` (pydantic) is loaded on first use, so importing this package stays
light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fleet.core.blocks.classifier import (
    Classifier,
    Detector,
    classifier_for,
    classify,
    plugin_detectors,
    reset_plugins,
)
from fleet.core.blocks.seen import MAX_BODY, Seen
from fleet.core.blocks.verdicts import (
    ESCALATING,
    OK,
    VENDORS,
    VERDICT_KINDS,
    Blocked,
    Challenge,
    Verdict,
    VerdictKind,
)

if TYPE_CHECKING:
    from fleet.core.blocks.rules import BlockRule

__all__ = [
    "ESCALATING",
    "MAX_BODY",
    "OK",
    "VENDORS",
    "VERDICT_KINDS",
    "BlockRule",
    "Blocked",
    "Challenge",
    "Classifier",
    "Detector",
    "Seen",
    "Verdict",
    "VerdictKind",
    "classifier_for",
    "classify",
    "plugin_detectors",
    "reset_plugins",
]


def __getattr__(name: str) -> Any:
    if name == "BlockRule":  # pydantic: loaded when a config or a test asks for it
        from fleet.core.blocks.rules import BlockRule

        return BlockRule
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
