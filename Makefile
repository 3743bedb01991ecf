# The two commands a new user runs (README): `make demo` and `make test`.
# Both create .venv and install into it the first time; later runs reuse it.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test install clean

install: $(STAMP)

# torch is installed first and pinned exactly: a looser requirement would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[test]"
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/triage demo

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) triage-data build *.egg-info
