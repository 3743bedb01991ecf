"""What the test files share (larger helpers live beside them: procs, store_spools, ...).

pytest puts this folder on sys.path (rootdir-relative "prepend" import mode), so the helper
modules import by name from any test file; no test pushes sys.path by hand.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest

# `triage ...` as a user runs it, in a separate process, from the venv running the tests.
TRIAGE_CLI = [sys.executable, "-m", "triage.cli"]
PROMETHEUS_INSTALL = "install Debian's `prometheus` package (apt-get install prometheus; .ci/run does it)"


def require_tool(*names: str, install: str) -> str:
    """The path of the first of `names` on PATH. Skipped where it is missing, except in CI, where
    a skip would hide a broken install: there the test fails (`.ci/run` installs the tools)."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    message = f"{' / '.join(names)} not found: {install}"
    if os.environ.get("CI"):
        pytest.fail(message + " -- required in CI, where a skip would hide a broken install")
    pytest.skip(message)


# What a developer's shell (or a job the tests run inside) may have set that would point a test at
# another data dir, job or rendezvous.
_CALLER_ENV_PREFIXES = ("TRIAGE_", "TORCHELASTIC_", "PET_")
_CALLER_ENV_NAMES = {
    "RANK",
    "LOCAL_RANK",
    "GROUP_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
}


@pytest.fixture(autouse=True)
def hermetic_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts without the caller's Triage and torchrun variables (restored after)."""
    for name in list(os.environ):
        if name.startswith(_CALLER_ENV_PREFIXES) or name in _CALLER_ENV_NAMES:
            monkeypatch.delenv(name)


#: The longest test files, longest first (`make test PYTEST_ARGS=--durations=0` on the 2-core
#: reference machine, 2026-12-07: 6.1, 4.9, 4.7, 3.7, 3.6, 3.3, 2.9, 1.5, 1.4 and 1.2 min of
#: test time). `make test` runs the files on two workers (pytest-xdist, `--dist loadfile`),
#: which take files in collection order: a long file left for the end would run alone while the
#: other worker idles. Only the order depends on this list; a file missing from it runs after these.
LONGEST_FIRST = (
    "test_supervisor_actions.py",
    "test_scenario_matrix.py",
    "test_trainer_scenarios.py",
    "test_fleet_history.py",
    "test_slurm.py",
    "test_rca_bench.py",
    "test_unmodified_script.py",
    "test_bad_inputs.py",
    "test_demo.py",
    "test_dashboard.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: a file's tests keep their order
