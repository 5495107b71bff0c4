"""A plugin that fails to import (the worker must report it and go on)."""

raise RuntimeError("this plugin is broken on purpose")
