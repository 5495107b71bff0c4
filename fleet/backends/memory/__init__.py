"""The memory backend: one process, real semantics (``memory://name``)."""

from fleet.backends.memory.backend import MemoryBackend

__all__ = ["MemoryBackend"]
