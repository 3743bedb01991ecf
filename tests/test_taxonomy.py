"""The taxonomy in code must equal the contract in shared/failure-taxonomy.md."""

import os
import re
from pathlib import Path

import pytest

from triage.taxonomy import TAXONOMY, Action, Category, Layer
from triage.verdict import Culprit, Verdict

SHARED = Path(os.environ.get("TRIAGE_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))
TAXONOMY_MD = SHARED / "failure-taxonomy.md"


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


@pytest.mark.skipif(not TAXONOMY_MD.exists(), reason=f"{TAXONOMY_MD} not present beside the repo")
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
