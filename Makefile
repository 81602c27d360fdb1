PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint docs bench bench-scale clean

## make run: create .venv, install kbsync, sync the sample corpus into an embedded SQLite
## store (examples/.kbsync/), print the report, and search it
run: $(VENV)/.installed
	$(BIN)/kbsync sync -c examples
	$(BIN)/kbsync search "how do retries work" -k 3 -c examples
	$(BIN)/kbsync status -c examples

## make test: install the dev extras, then ruff, mypy --strict, the import-layer check, pytest
## and the documentation build (warnings are errors)
test: $(VENV)/.dev-installed lint docs
	$(BIN)/pytest

## make docs: the API reference from docstrings, into site/
docs: $(VENV)/.dev-installed
	$(BIN)/mkdocs build --strict --site-dir site

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/mypy
	$(BIN)/lint-imports

## make bench: install the peer chunkers and run the chunking benchmark (several minutes)
bench: $(VENV)/.dev-installed
	$(BIN)/python -m pip install --quiet -r benchmarks/requirements.txt
	$(BIN)/python benchmarks/chunking.py
	$(BIN)/python benchmarks/sync.py

## make bench-scale: SQLite against PostgreSQL, 1 and 2 workers, at two corpus sizes (an hour)
bench-scale: $(VENV)/.dev-installed
	$(BIN)/python benchmarks/scale.py --docs 3000 --docs 10000

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml setup.py src/kbsync/_kernel.c src/kbsync/_nfc_table.h $(wildcard src/kernel/*.h) | $(VENV)/bin/python
	$(BIN)/python -m pip install --quiet -e '.[html,pdf,local]'
	touch $@

$(VENV)/.dev-installed: pyproject.toml setup.py src/kbsync/_kernel.c src/kbsync/_nfc_table.h $(wildcard src/kernel/*.h) | $(VENV)/bin/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis site
