# The two entry points of the README. Both set everything up on a fresh machine (Python 3.11, a JDK 17
# and Maven on PATH): a virtualenv, the package, the jars (cached in ~/.cache/hbase-ingest) and the
# local Kafka + HBase stack.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test install stack-up stack-down lint bench

demo: install
	$(BIN)/hbase-ingest demo

test: install stack-up
	$(BIN)/python -m pytest

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

stack-up: install
	$(BIN)/hbase-ingest stack up --secure

stack-down:
	$(BIN)/hbase-ingest stack down

lint: install
	$(BIN)/ruff check pipeline connectors tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: install stack-up
	$(BIN)/python -m bench
