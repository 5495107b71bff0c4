"""Fleet: typed async automations run across a fleet of machines."""

__version__ = "0.1.0"
