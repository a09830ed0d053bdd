PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint fmt run explain crds bench certs clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

fmt: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

explain: $(STAMP)
	$(BIN)/kerf explain -f examples/storefront -o text

run: explain

crds: $(STAMP)
	$(BIN)/python -m app.crdgen manifests/crds

bench: $(STAMP)
	$(BIN)/python -m app.bench --out .bench/explain.json

clean:
	rm -rf $(VENV) .bench build dist *.egg-info
