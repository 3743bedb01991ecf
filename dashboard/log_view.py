"""An attempt's captured output (`triage run` keeps it under `logs/<job>/<run>/`) as rows a page
can show: per line its number, the rank its `[rank<N>]:` prefix names, and, for the lines the
log classifier matches, the category and whether it is a symptom, so the decisive ones stand
out. Only the newest `tail_bytes` are read: an attempt may keep up to --log-max-mb on disk.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from triage.analyzers.log_classifier import classify_line, rank_prefix
from triage.store.layout import attempt_log_paths

COLUMNS = ["line", "rank", "category", "symptom", "text"]
DEFAULT_TAIL_BYTES = 8 * 1024 * 1024
_SHOWN_CHARS = 2000


def _tail_lines(paths: list[Path], tail_bytes: int) -> tuple[list[str], int]:
    """The last lines of the files read as one (oldest first) within `tail_bytes`, and the
    number of the first line returned (1-based) where the whole text was read, else 0."""
    chunks: list[bytes] = []
    budget = tail_bytes
    whole = True
    for path in reversed(paths):
        size = path.stat().st_size
        with open(path, "rb") as fh:
            if size > budget:
                fh.seek(size - budget)
                data = fh.read()
                data = data[data.find(b"\n") + 1 :]  # drop the torn first line
                whole = False
            else:
                data = fh.read()
        chunks.insert(0, data)
        budget -= len(data)
        if budget <= 0:
            whole = False
            break
    lines = b"".join(chunks).decode(errors="replace").splitlines()
    return lines, 1 if whole else 0


def read_attempt_log(
    data_dir: str | Path,
    job_id: str,
    run_id: str,
    attempt: int,
    *,
    rank: int | None = None,
    decisive_only: bool = False,
    max_lines: int = 2000,
    tail_bytes: int = DEFAULT_TAIL_BYTES,
) -> pd.DataFrame:
    """The newest `max_lines` lines (of one rank, or only decisive ones, where asked); an
    empty frame where nothing was captured."""
    paths = attempt_log_paths(data_dir, job_id, run_id, attempt)
    if not paths:
        return pd.DataFrame(columns=COLUMNS)
    lines, first = _tail_lines(paths, tail_bytes)
    rows = []
    for i, text in enumerate(lines):
        who = rank_prefix(text)
        if rank is not None and who != rank:
            continue
        match = classify_line(text)
        if decisive_only and match is None:
            continue
        rows.append(
            {
                "line": first + i if first else None,
                "rank": who,
                "category": match.category.value if match else None,
                "symptom": bool(match.symptom) if match else None,
                "text": text[:_SHOWN_CHARS],
            }
        )
    return pd.DataFrame(rows[-max_lines:], columns=COLUMNS)


def highlight(frame: pd.DataFrame) -> pd.io.formats.style.Styler:
    """Decisive lines in red (a cause) or amber (a symptom); the rest as they are."""

    def row_style(row: pd.Series) -> list[str]:
        if row["category"] is None or pd.isna(row["category"]):
            return [""] * len(row)
        colour = "#f8d7da" if not row["symptom"] else "#fff3cd"
        return [f"background-color: {colour}"] * len(row)

    return frame.style.apply(row_style, axis=1)
