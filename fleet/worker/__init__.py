"""The worker: loads plugins, runs their slots, reports state over the backend."""
