VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: venv test lint dev

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q -U pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

venv: $(VENV)/.installed

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

test: lint
	$(VENV)/bin/pytest -q

# `make dev`: the example plugins installed (editable) next to Fleet, then a master,
# a worker, the demo site and demo tasks in one terminal. Extra flags: DEV_ARGS=...
EXAMPLES := cf-contracts cf-cookie-harvester cf-scraper pinger inventory-sync

$(VENV)/.examples: $(VENV)/.installed $(foreach e,$(EXAMPLES),examples/$(e)/pyproject.toml)
	$(PY) -m pip install -q $(foreach e,$(EXAMPLES),-e examples/$(e))
	touch $@

dev: $(VENV)/.examples
	$(VENV)/bin/fleet dev --demo $(DEV_ARGS)
