"""Clients of the master's REST API: :class:`FleetClient` and the CLI client commands."""
