"""The classifier: an ordered list of detectors, the first verdict wins.

The order: a type's config rules (:mod:`fleet.core.blocks.rules`), then the detectors
of installed plugins (the ``fleet.block_detectors`` entry points), then the built-in
detectors (:data:`fleet.core.blocks.detectors.BUILT_IN`). No verdict: :data:`OK`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final, TypeAlias

from fleet.core.blocks.detectors import BUILT_IN
from fleet.core.blocks.seen import HeadersLike, Seen
from fleet.core.blocks.verdicts import OK, Verdict

if TYPE_CHECKING:
    from fleet.core.blocks.rules import BlockRule

log = logging.getLogger("fleet.blocks")

#: A detector reads a response and answers its verdict, or None ("not mine").
Detector: TypeAlias = Callable[[Seen], Verdict | None]
#: Entry-point group of plugins' detectors: ``name = "module:callable_or_class"``.
GROUP: Final = "fleet.block_detectors"
#: How many rule lists :func:`classifier_for` keeps classifiers for.
CACHED_RULE_SETS: Final = 64

_lock = threading.Lock()
_plugins: tuple[Detector, ...] | None = None
_default: Classifier | None = None
_by_rules: OrderedDict[str, Classifier] = OrderedDict()
_failed: set[int] = set()


class Classifier:
    """Classifies responses with an ordered list of detectors.

    Args:
        rules: A type's block rules, tried first.
        plugins: Also try the detectors of the ``fleet.block_detectors`` entry points.
        detectors: The detectors tried last (default: the built-in ones).
    """

    __slots__ = ("detectors",)

    def __init__(
        self,
        rules: Sequence[BlockRule] | None = None,
        *,
        plugins: bool = True,
        detectors: Sequence[Detector] | None = None,
    ) -> None:
        chain: list[Detector] = []
        if rules:
            from fleet.core.blocks.rules import rules_detector

            chain.append(rules_detector(rules))
        if plugins:
            chain.extend(plugin_detectors())
        chain.extend(BUILT_IN if detectors is None else detectors)
        #: The detectors in the order they are tried.
        self.detectors: tuple[Detector, ...] = tuple(chain)

    def __call__(
        self, status: int, headers: HeadersLike | None, body: str | bytes | None, url: str = ""
    ) -> Verdict:
        """The verdict of a response (``headers``, ``body`` as :meth:`Seen.of` takes them)."""
        return self.seen(Seen.of(status, headers, body, url))

    def seen(self, seen: Seen) -> Verdict:
        """The first verdict a detector gives ``seen``; :data:`OK` when none does."""
        for detector in self.detectors:
            try:
                verdict = detector(seen)
            except Exception:
                _failed_once(detector)
                continue
            if verdict is not None:
                return verdict
        return OK


def _failed_once(detector: Detector) -> None:
    # a broken detector fails on most responses: one traceback is enough
    key = id(detector)
    if key in _failed:
        return
    _failed.add(key)
    log.exception("block detector %s raised; skipped", _name(detector))


def _name(detector: object) -> str:
    module = getattr(detector, "__module__", "?")
    return f"{module}.{getattr(detector, '__qualname__', type(detector).__qualname__)}"


def _entry_points_enabled() -> bool:
    # the switch fleet.plugins reads (FLEET_ENTRY_POINTS=0: no installed entry points)
    raw = os.environ.get("FLEET_ENTRY_POINTS", "1")
    return raw.strip().lower() not in ("0", "false", "no", "off")


def _load_plugins() -> tuple[Detector, ...]:
    from importlib.metadata import entry_points

    found: list[Detector] = []
    for ep in sorted(entry_points(group=GROUP), key=lambda ep: ep.name):
        try:
            loaded = ep.load()
            detector = loaded() if isinstance(loaded, type) else loaded
            if not callable(detector):
                raise TypeError(f"{type(detector).__name__} is not callable")
        except Exception as exc:
            log.warning(
                "block detector plugin %s = %s not loaded (%s: %s); skipped",
                ep.name,
                ep.value,
                type(exc).__name__,
                exc,
            )
            continue
        found.append(detector)
    return tuple(found)


def plugin_detectors() -> tuple[Detector, ...]:
    """The detectors of the ``fleet.block_detectors`` entry points, sorted by name (loaded
    once per process; a plugin that fails to load is logged and skipped)."""
    global _plugins
    if _plugins is None:
        with _lock:
            if _plugins is None:
                _plugins = _load_plugins() if _entry_points_enabled() else ()
    return _plugins


def reset_plugins() -> None:
    """Forget the loaded plugins and every cached classifier (tests; a process that
    installed a plugin)."""
    global _plugins, _default
    with _lock:
        _plugins = None
        _default = None
        _by_rules.clear()
        _failed.clear()


def default_classifier() -> Classifier:
    """The classifier of :func:`classify`: plugins' and built-in detectors."""
    global _default
    if _default is None:
        _default = Classifier()
    return _default


def classify(
    status: int, headers: HeadersLike | None, body: str | bytes | None, url: str = ""
) -> Verdict:
    """The verdict of a response by the plugins' and the built-in detectors."""
    return default_classifier()(status, headers, body, url)


def classifier_for(rules: Sequence[BlockRule] | None) -> Classifier:
    """The classifier of a type's ``block_rules`` (cached by the rules' JSON; no rules:
    the default classifier). Keep the answer: building the key dumps every rule."""
    if not rules:
        return default_classifier()
    key = json.dumps([rule.model_dump(mode="json", exclude_defaults=True) for rule in rules])
    with _lock:
        found = _by_rules.get(key)
        if found is not None:
            _by_rules.move_to_end(key)
            return found
    built = Classifier(rules)
    with _lock:
        _by_rules[key] = built
        while len(_by_rules) > CACHED_RULE_SETS:
            _by_rules.popitem(last=False)
    return built
