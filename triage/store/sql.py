"""SQL text helpers shared by the writer and readers."""

from __future__ import annotations

import os
from collections.abc import Sequence


def sql_quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def parquet_source(paths: Sequence[str | os.PathLike[str]]) -> str:
    """A DuckDB table expression over Parquet files, columns matched by name."""
    return f"read_parquet([{', '.join(sql_quote(str(p)) for p in paths)}], union_by_name=true)"
