# Two entry points (see README): `make verify` sets up and verifies the bundled checkpoint;
# `make test` sets up and runs the test suite. Both create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup verify test bench html-check clean docs

setup: $(VENV)/.installed

# torch==2.13.0 first: the CPU build on this machine's disk (an unpinned torch pulls a multi-GB CUDA
# build); the project's own range then installs nothing more.
$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

verify: setup
	$(BIN)/assignadd-verify --out out/reference

# The suite, then every claim on the bundled checkpoint through the shipped pytest plugin. The suite runs
# in one pytest-xdist worker per core (at most 4; TEST_WORKERS=1 for one worker); tests that share an
# expensive module fixture carry an xdist_group mark and stay in one worker. While editing,
# `pytest -m "not slow"` leaves out the tests that take more than about 10 s each.
TEST_WORKERS ?= auto
test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --maxprocesses 4 --dist loadgroup
	$(BIN)/python -m pytest -q -m assignadd_claim --assignadd-checkpoint reference

# Render a report in headless Chromium and check every figure loaded (needs Debian's chromium).
html-check: setup
	$(BIN)/python -m pytest -q tests/test_verify_html.py

bench: setup
	$(BIN)/python bench/data_speed.py
	$(BIN)/python bench/train_speed.py
	$(BIN)/python bench/intervention_speed.py
	$(BIN)/python bench/verify_speed.py
	$(BIN)/python bench/thread_scaling.py

clean:
	rm -rf $(VENV) out

# Regenerate the generated pages of docs/ from the code (docs/README.md, "Generated output"): the cheap
# targets by default; DOCS_ARGS=--check compares instead of writing, DOCS_ARGS=--expensive adds the
# training runs, matrices and calibration (hours).
DOCS_ARGS ?=
docs: setup
	$(BIN)/python tools/regenerate_docs.py $(DOCS_ARGS)
