"""The Redis backend: a fleet (``redis://``, ``rediss://``, ``unix://``).

Imported only when a URL asks for it: redis-py is needed only here.
"""

from fleet.backends.redis.backend import RedisBackend

__all__ = ["RedisBackend"]
