"""Names that become paths and SQL values: job ids, run ids and node names, checked in one place.

A job id, run id or node name is a directory name in the data dir (`spool/<node>/<job>/...`,
`store/<node>/`, `locks/<job>.lock`), so an unchecked one could climb out of it (`..`), nest
(`a/b`), or be unencodable on disk. Every entry point (CLI flags, environment, hook config)
validates through `check_name` before a path is built from the value.
"""

from __future__ import annotations

import re

from triage.config import ConfigError

#: Letters, digits, `.`, `_` and `-`, starting with a letter or digit, at most 128 characters:
#: safe as a file name on every filesystem a cluster uses, and never `.` or `..`.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_NAME_RE = re.compile(NAME_PATTERN)


def is_valid_name(value: object) -> bool:
    return isinstance(value, str) and _NAME_RE.match(value) is not None


def check_name(kind: str, value: str, *, source: str = "") -> str:
    """`value` if it is a valid `kind` ("job id", "run id", "node name"), else a `ConfigError`
    naming where it came from (`source`: "--job-id", "env TRIAGE_NODE", ...)."""
    if is_valid_name(value):
        return value
    where = f" ({source})" if source else ""
    raise ConfigError(
        f"bad {kind} {value!r}{where}: use 1-128 letters, digits, '.', '_' or '-', "
        f"starting with a letter or digit (pattern {NAME_PATTERN})"
    )
