"""Run mypy over the installed package layout.

The repository keeps each layer in a top-level folder (`analyzers/`, `agent/`, ...) that installs
as `triage.<layer>` through `[tool.setuptools.package-dir]`. mypy cannot follow that mapping (nor
the editable-install finder that implements it), so this script builds the layout it would see
after installation as a tree of symlinks under `build/typecheck/`, runs mypy there with the
project's configuration, and prints each error with the path of the real file.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "typecheck"


def build_tree() -> None:
    """`build/typecheck/triage/...` with the folders of package-dir linked where they install."""
    mapping: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    shutil.rmtree(TREE, ignore_errors=True)
    top = TREE / "triage"
    top.mkdir(parents=True)
    for entry in (ROOT / mapping["triage"]).iterdir():
        if entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry)
    for package, folder in mapping.items():
        if package != "triage":
            (TREE / package.replace(".", "/")).symlink_to(ROOT / folder)


def main() -> int:
    build_tree()
    links = {
        f"triage/{p.name}/": f"{p.resolve().relative_to(ROOT)}/"
        for p in (TREE / "triage").iterdir()
        if p.is_symlink() and p.is_dir()
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            # outside the tree rebuilt on every run, so a second run is incremental
            "--cache-dir",
            str(ROOT / "build" / "mypy-cache"),
            "-p",
            "triage",
        ],
        cwd=TREE,
        capture_output=True,
        text=True,
    )
    for line in (proc.stdout + proc.stderr).splitlines():
        for linked, real in links.items():
            if line.startswith(linked):
                line = real + line[len(linked) :]
                break
        print(line)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
