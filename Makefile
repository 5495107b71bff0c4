VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: venv test lint dev examples chaos

# A venv made before the distribution was renamed still holds `fleet`: it is dropped.
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q -U pip
	@$(PY) -m pip uninstall -q -y fleet 2>/dev/null || true
	$(PY) -m pip install -q -e '.[test]'
	touch $@

venv: $(VENV)/.installed

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Two processes (pytest-xdist), a test file each at a time: a module's fixtures stay in
# one process; most tests wait on real processes and timers, so the suite takes ~2/3.
test: lint
	$(VENV)/bin/pytest -q -n 2 --dist loadfile

# `make dev`: the example plugins installed (editable) next to Fleet, then a master,
# a worker, the demo site and demo tasks in one terminal. Extra flags: DEV_ARGS=...
EXAMPLES := cf-contracts cf-cookie-harvester cf-scraper pinger inventory-sync

$(VENV)/.examples: $(VENV)/.installed $(foreach e,$(EXAMPLES),examples/$(e)/pyproject.toml)
	$(PY) -m pip install -q $(foreach e,$(EXAMPLES),-e examples/$(e))
	touch $@

examples: $(VENV)/.examples

dev: $(VENV)/.examples
	$(VENV)/bin/fleet dev --demo $(DEV_ARGS)

# The long chaos run (CI runs the short one with the suite); prints the chaos table.
chaos: venv
	FLEET_CHAOS_LONG=1 FLEET_TEST_REQUIRE_REDIS=1 $(VENV)/bin/pytest -q -s -m chaos tests/chaos
