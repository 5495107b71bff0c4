"""Automations used by the worker tests (loaded with ``--plugin``)."""
