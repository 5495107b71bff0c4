"""``BrowserNeeds``: an automation's declaration of the browser pool it wants.

This module is a declaration only. It imports nothing of a browser stack; the
worker reads the declaration and boots the pool from ``fleet.browser``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from fleet.core.errors import ContractValueError

Engine = Literal["chromium", "cloak", "firefox", "webkit"]
_ENGINES = ("chromium", "cloak", "firefox", "webkit")


@dataclass(frozen=True)
class BrowserNeeds:
    """What browser pool an automation needs.

    Args:
        size: Browsers kept warm in the pool (1..64).
        max_uses: Acquisitions before a browser is retired (>= 1).
        engine: Which browser engine to launch.
        headless: Launch without a window.
        launch_args: Extra command-line arguments for the browser.
        executable_path: A browser binary to use instead of the engine's default.

    Raises:
        ContractValueError: If a value is out of range or the engine is unknown.
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
        if self.engine not in _ENGINES:
            raise ContractValueError(
                f"BrowserNeeds.engine must be one of {', '.join(_ENGINES)}, got {self.engine!r}",
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
