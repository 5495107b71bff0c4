"""The master: REST API, catalog, sweeper, metrics and live events over the backend."""

from fleet.master.app import create_app

__all__ = ["create_app"]
