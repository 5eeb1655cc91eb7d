# Two entry points (see README): `make verify` sets up and verifies the bundled checkpoint;
# `make test` sets up and runs the test suite. Both create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup verify test bench html-check clean

setup: $(VENV)/.installed

# torch==2.13.0 first: the CPU build on this machine's disk (an unpinned torch pulls a multi-GB CUDA
# build); the project's own range then installs nothing more.
$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e .
	touch $@

verify: setup
	$(BIN)/assignadd-verify --out out/reference

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python bench/data_speed.py
	$(BIN)/python bench/train_speed.py

clean:
	rm -rf $(VENV) out
