# The two commands a new user runs (README): `make demo` and `make test`.
# Every target creates .venv and installs into it the first time; later runs reuse it.
# `make test-fast` (unit tests, no multi-process scenarios) and `make lint` are for the dev loop;
# CI (.ci/run) runs `make lint` beside `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast lint format install clean

install: $(STAMP)

# torch is installed first and pinned exactly: a looser requirement would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[test,lint]"
	@touch $(STAMP)

# Where PYTHONDONTWRITEBYTECODE is set (CI's machines set it), no process writes bytecode, so
# every rank, agent and supervisor of a run would compile Triage's modules anew (30-60 ms each,
# hundreds of processes in `make test`); compiled once here, which takes 0.1 s when nothing
# changed. A module edited later is still read from its source: Python checks the mtime.
SOURCES := agent alerts analyzers benchmarks collectors dashboard deploy reference_trainer trainer_hooks triage tools
BYTECODE = $(PY) -m compileall -q -j 0 $(SOURCES) >/dev/null

demo: $(STAMP)
	@$(BYTECODE)
	$(VENV)/bin/triage demo

# Two workers, one test file each at a time (a file's module fixtures, such as the Slurm
# cluster, exist once): the scenario tests wait on timeouts as much as they compute.
TEST_WORKERS ?= 2
test: $(STAMP)
	@$(BYTECODE)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-fast: $(STAMP)
	@$(BYTECODE)
	$(PY) -m pytest -m "not slow" -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# ruff (lint + format check) and mypy (strict on triage/, analyzers/, trainer_hooks/).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) tools/typecheck.py

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) triage-data build *.egg-info
