"""``fleet dev``: a master, a worker and (with ``--demo``) a local demo site in one command."""
