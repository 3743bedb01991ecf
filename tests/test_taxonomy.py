"""The taxonomy in code must equal the contract in docs/failure-taxonomy.md, and the contracts
vendored in docs/ must equal the team's originals in ../shared wherever that folder exists."""

import os
import re
from pathlib import Path

import pytest

from triage.taxonomy import TAXONOMY, Action, Category, Layer
from triage.verdict import Culprit, Verdict

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
TAXONOMY_MD = DOCS / "failure-taxonomy.md"
#: The team's shared contract beside the repository (absent on a fresh clone).
SHARED = Path(os.environ.get("TRIAGE_SHARED_DIR", REPO.parent / "shared"))
#: In-repo copy (under docs/) -> the shared original it vendors.
VENDORED = {"architecture.md": "ARCHITECTURE.md", "failure-taxonomy.md": "failure-taxonomy.md"}


@pytest.mark.parametrize(("copy", "original"), sorted(VENDORED.items()))
def test_vendored_contract_equals_shared(copy: str, original: str) -> None:
    assert (DOCS / copy).is_file(), f"docs/{copy} is missing: copy it from {SHARED / original}"
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} not present beside the repo")
    assert (DOCS / copy).read_bytes() == (SHARED / original).read_bytes(), (
        f"docs/{copy} differs from {SHARED / original}: copy the shared contract into docs/ again"
    )


def _md_rows() -> dict[str, tuple[str, list[str], bool]]:
    rows = {}
    for line in TAXONOMY_MD.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[0].startswith("`"):
            continue
        category = cells[0].strip("`")
        actions = re.findall(r"`([a-z_]+)`", cells[4])
        rows[category] = (cells[1], actions, "excluding the culprit" in cells[4])
    return rows


def test_code_table_equals_markdown_contract():
    rows = _md_rows()
    assert set(rows) == {c.value for c in Category}
    for name, (layer, actions, excludes_culprit) in rows.items():
        spec = TAXONOMY[Category(name)]
        assert spec.layer.value == layer, name
        assert spec.action.value == actions[0], name
        named = [a for a in actions if a in {x.value for x in Action}]
        expected = [spec.action.value] + ([spec.escalation.value] if spec.escalation else [])
        assert named == expected, name
        assert spec.exclude_culprit_if_found == excludes_culprit, name


def test_layers_are_ordered_top_down():
    assert Layer.APPLICATION.depth < Layer.FRAMEWORK.depth < Layer.COMMUNICATION.depth
    assert Layer.COMMUNICATION.depth < Layer.GPU.depth < Layer.HOST.depth < Layer.INFRASTRUCTURE.depth


def test_low_confidence_verdict_becomes_unknown():
    v = Verdict(Category.GPU_OOM, 0.3, "maybe OOM", Culprit(rank=1))
    t = v.thresholded(0.5)
    assert t.category is Category.UNKNOWN and t.culprit.rank == 1
    assert v.thresholded(0.2) is v
    d = v.to_dict()
    assert d["layer"] == "application" and d["action"] == "fail_fast"
    with pytest.raises(ValueError):
        Verdict(Category.GPU_OOM, 1.5, "bad")
