"""``BrowserNeeds``: an automation's declaration of the browser pool it wants.

This module is a declaration only. It imports nothing of a browser stack; the
worker reads the declaration and boots the pool from ``fleet.browser``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from fleet.core.errors import ContractValueError

#: A browser engine's name: a built-in one (:data:`BUILTIN_ENGINES`) or one registered
#: by a plugin in the entry-point group ``fleet.browser_engines``.
Engine: TypeAlias = str
#: The engines Fleet ships (``cloak`` needs ``pip install 'fleet-automation[cloak]'``).
BUILTIN_ENGINES = ("chromium", "cloak", "firefox", "webkit")
_ENGINE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class BrowserNeeds:
    """What browser pool an automation needs.

    Args:
        size: Browsers kept warm in the pool (1..64).
        max_uses: Acquisitions before a browser is retired (>= 1).
        engine: Which browser engine launches the browsers: a built-in one
            (:data:`BUILTIN_ENGINES`) or a plugin's. Only the form of the name is
            checked here; a name no engine is registered under makes the pool's
            warm-up fail (plugins may register engines this process has not seen).
        headless: Launch without a window.
        launch_args: Extra command-line arguments for the browser.
        executable_path: A browser binary to use instead of the engine's default.

    Raises:
        ContractValueError: If a value is out of range or the engine is not a name.
    """

    size: int = 1
    max_uses: int = 1
    engine: Engine = "chromium"
    headless: bool = True
    launch_args: tuple[str, ...] = field(default_factory=tuple)
    executable_path: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.size, int) or not 1 <= self.size <= 64:
            raise ContractValueError(
                f"BrowserNeeds.size must be 1..64, got {self.size!r}", field="size"
            )
        if not isinstance(self.max_uses, int) or self.max_uses < 1:
            raise ContractValueError(
                f"BrowserNeeds.max_uses must be >= 1, got {self.max_uses!r}", field="max_uses"
            )
        if not isinstance(self.engine, str) or not _ENGINE_NAME.fullmatch(self.engine):
            raise ContractValueError(
                "BrowserNeeds.engine must be an engine's name (built in: "
                f"{', '.join(BUILTIN_ENGINES)}; plugins add more), got {self.engine!r}",
                field="engine",
            )
        if isinstance(self.launch_args, list):
            object.__setattr__(self, "launch_args", tuple(self.launch_args))
        if not all(isinstance(a, str) for a in self.launch_args):
            raise ContractValueError(
                "BrowserNeeds.launch_args must be strings", field="launch_args"
            )

    def describe(self) -> dict[str, Any]:
        """The declaration as a JSON-able dict (for the catalog)."""
        return {
            "size": self.size,
            "max_uses": self.max_uses,
            "engine": self.engine,
            "headless": self.headless,
            "launch_args": list(self.launch_args),
        }
