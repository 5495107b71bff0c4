"""Webhooks (docs/webhooks.md): signed deliveries of Fleet's events to a URL.

:mod:`fleet.webhooks.signing` the Standard Webhooks signature; :mod:`.events` the
events, their ids and bodies; :mod:`.automation` the built-in type ``fleet-webhooks``
whose tasks are the deliveries (a ``fleet worker --plugin fleet.webhooks.automation``
runs them, as does every master by default). Imports ``fleet.core`` only, like a
plugin.
"""
