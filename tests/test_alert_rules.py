"""The alert rules, their promtool unit tests, the runbook and the metric catalog agree.

promtool checks the rules' syntax and runs alerts/tests/*.yml; the checks here hold what
promtool cannot see: every metric and label a rule uses is in agent/metric_catalog.py, names
follow docs/architecture.md's rules, categories and actions match the taxonomy, every runbook link
resolves, every alert has a unit test, and the README lists the catalog.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml
from conftest import PROMETHEUS_INSTALL, require_tool

from triage.agent.metric_catalog import (
    ALERTED_XIDS,
    BASE_UNITS,
    BY_NAME,
    CATALOG,
    PRECREATED,
    MetricType,
    family_of_sample,
    markdown_table,
)
from triage.taxonomy import TAXONOMY, Action, Category

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "alerts" / "triage-rules.yml"
UNIT_TESTS = sorted((ROOT / "alerts" / "tests").glob("*.yml"))
RUNBOOK = ROOT / "alerts" / "RUNBOOK.md"
README = ROOT / "README.md"

SEVERITIES = {"critical", "warning", "info"}
#: Labels Prometheus adds at scrape time; rules may use them on any metric.
TARGET_LABELS = {"job", "instance"}
#: Labels a family may carry whose values are bounded by the cluster, not by a closed list.
IDENTITY_LABELS = {"node", "gpu", "uuid", "job", "rank", "collector", "xid", "nic"}

_SELECTOR = re.compile(r"(?<![\w:])(triage_[a-z_]+)(?![\w:])\s*(\{[^}]*\})?")
_MATCHER = re.compile(r'([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*"([^"]*)"')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_TEMPLATE_LABEL = re.compile(r"\$labels\.(\w+)")


def _alerts() -> list[dict]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [r for g in groups for r in g["rules"] if "alert" in r]


def _rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def catalog_violations(expr: str) -> list[str]:
    """What in one PromQL expression the catalog does not back: unknown metric families,
    labels a family does not carry, values a bounded label never takes."""
    problems = []
    used_labels: set[str] = set(TARGET_LABELS)
    for name, matchers in _SELECTOR.findall(expr):
        fam = family_of_sample(name)
        if fam is None:
            problems.append(f"{name} is not in the metric catalog")
            continue
        allowed = set(fam.sample_labels(name)) | TARGET_LABELS
        used_labels |= allowed
        for label, op, value in _MATCHER.findall(matchers):
            if label not in allowed:
                problems.append(f"{name} has no label {label!r} (has {sorted(allowed)})")
            known = ALERTED_XIDS if label == "xid" else fam.label_values(label)
            if known is not None and op in ("=", "=~"):
                for alternative in value.split("|") if op == "=~" else [value]:
                    if alternative not in known:
                        problems.append(f"{name}{{{label}}} never takes {alternative!r}")
    for group in _GROUPING.findall(expr):
        for label in filter(None, (x.strip() for x in group.split(","))):
            if label not in used_labels:
                problems.append(f"grouping by {label!r}, which no metric of the rule carries")
    return problems


def _selected_values(expr: str, label: str) -> set[str]:
    return {
        alt
        for lab, op, value in _MATCHER.findall(expr)
        if lab == label and op in ("=", "=~")
        for alt in value.split("|")
    }


def _anchor(heading: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


# --- the catalog --------------------------------------------------------------------------


def test_catalog_names_follow_the_naming_rules():
    assert len(BY_NAME) == len(CATALOG), "duplicate family names"
    for fam in CATALOG:
        assert re.fullmatch(r"triage_[a-z][a-z_]*[a-z]", fam.name), fam.name
        assert fam.name.endswith("_total") == (fam.type is MetricType.COUNTER), fam.name
        stem = fam.name.removesuffix("_total")
        suffix_unit = next((u for u in BASE_UNITS if stem.endswith("_" + u)), "")
        assert fam.unit == suffix_unit, f"{fam.name}: unit {fam.unit!r}, name says {suffix_unit!r}"
        assert fam.help.strip(), fam.name
        for label in fam.labels:
            assert label in IDENTITY_LABELS or fam.label_values(label), (
                f"{fam.name}: label {label!r} is neither an identity label nor a bounded one"
            )
            assert label not in {"le", "quantile", "instance"}, f"{fam.name}: reserved {label}"


def test_precreated_counters_cover_every_alerted_value():
    for name, values in PRECREATED.items():
        fam = BY_NAME[name]
        assert fam.type is MetricType.COUNTER, name
        assert set(values) <= set(fam.labels), name
    alerted = set()
    for rule in _alerts():
        alerted |= _selected_values(rule["expr"], "xid") if "xid_errors" in rule["expr"] else set()
    assert alerted == set(ALERTED_XIDS), "the Xids the rules act on and those created at 0 differ"


# --- the rules against the catalog ---------------------------------------------------------


def test_rules_use_only_catalog_metrics_labels_and_values():
    problems = [
        f"{r.get('alert') or r.get('record')}: {p}" for r in _rules() for p in catalog_violations(r["expr"])
    ]
    assert not problems, "\n".join(problems)
    referenced = {m for r in _rules() for m, _ in _SELECTOR.findall(r["expr"])}
    assert referenced, "no triage_ metric found in the rules: the parser is broken"


def test_catalog_check_catches_what_the_catalog_lacks():
    assert catalog_violations('triage_gpu_up{node="n"} == 0') == []
    assert catalog_violations("rate(triage_gpu_fan_speed_ratio[5m])")
    assert catalog_violations('triage_gpu_up{rank="3"} == 0')
    assert catalog_violations('triage_gpu_clock_event_active{reason=~"hw_thermal|too_hot"}')
    assert catalog_violations("max by (rank) (triage_job_tokens_per_second)")
    assert catalog_violations('triage_gpu_xid_errors_total{xid="13"}')
    assert catalog_violations('triage_gpu_remapped_rows{kind="replay"} > 0')


def test_templates_use_labels_the_rule_can_carry():
    for rule in _alerts():
        available = set(rule.get("labels", {})) | TARGET_LABELS
        for name, _ in _SELECTOR.findall(rule["expr"]):
            available |= set(family_of_sample(name).labels)
        for text in rule["annotations"].values():
            missing = set(_TEMPLATE_LABEL.findall(text)) - available
            assert not missing, f"{rule['alert']} templates labels it never has: {missing}"


# --- the rules against the operators' contract ---------------------------------------------


def test_the_throttling_alert_watches_exactly_the_health_reasons():
    from triage.collectors.records import CLOCK_EVENT_REASONS, HEALTH_CLOCK_EVENT_MASK

    health = {name for bit, name in CLOCK_EVENT_REASONS.items() if bit & HEALTH_CLOCK_EVENT_MASK}
    (expr,) = [r["expr"] for r in _rules() if r.get("alert") == "TriageGpuThrottling"]
    (matched,) = re.findall(r'reason=~"([^"]+)"', expr)
    assert set(matched.split("|")) == health == {"hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake"}


def test_every_alert_has_severity_annotations_and_a_runbook_section():
    anchors = {_anchor(line.lstrip("#")) for line in RUNBOOK.read_text().splitlines() if line.startswith("#")}
    for rule in _alerts():
        name = rule["alert"]
        assert re.fullmatch(r"Triage[A-Z]\w+", name), name
        assert rule["labels"]["severity"] in SEVERITIES, name
        ann = rule["annotations"]
        assert set(ann) == {"summary", "description", "runbook"}, name
        path, _, anchor = ann["runbook"].partition("#")
        assert path == "alerts/RUNBOOK.md" and anchor in anchors, f"{name}: {ann['runbook']}"
        if not rule["expr"].startswith("absent("):
            assert "$labels." in ann["summary"] and "$labels." in ann["description"], (
                f"{name} must name its job, node, rank or GPU"
            )


def test_categories_layers_and_actions_match_the_taxonomy():
    for rule in _alerts():
        labels = rule["labels"]
        if "category" not in labels:
            continue
        spec = TAXONOMY[Category(labels["category"])]
        assert labels["layer"] == spec.layer.value, rule["alert"]
        assert f"Taxonomy action: {spec.action.value}" in rule["annotations"]["description"], (
            f"{rule['alert']} must state the taxonomy action {spec.action.value}"
        )
        if spec.escalation:
            assert spec.escalation.value in rule["annotations"]["description"], rule["alert"]


def test_incident_alerts_partition_the_taxonomy_by_action():
    by_action: dict[str, set[str]] = {}
    for rule in _alerts():
        if "triage_incidents_total" not in rule["expr"]:
            continue
        action = re.search(r"Taxonomy action: (\w+)", rule["annotations"]["description"])[1]
        assert action not in by_action, f"two incident alerts for {action}"
        by_action[action] = _selected_values(rule["expr"], "category")
    expected = {a.value: {c.value for c in Category if c.action is a} for a in Action}
    assert by_action == {a: cats for a, cats in expected.items() if cats}


def test_every_alert_has_unit_tests_that_fire_and_stay_silent():
    fired, silent = set(), set()
    for path in UNIT_TESTS:
        spec = yaml.safe_load(path.read_text())
        assert spec["rule_files"] == ["../triage-rules.yml"], path.name
        for group in spec["tests"]:
            for case in group.get("alert_rule_test", []):
                (fired if case.get("exp_alerts") else silent).add(case["alertname"])
    names = {r["alert"] for r in _alerts()}
    assert names - fired == set(), "alerts no unit test makes fire"
    assert names - silent == set(), "alerts no unit test checks for silence"


# --- promtool -----------------------------------------------------------------------------


def _promtool() -> str:
    return require_tool("promtool", install=PROMETHEUS_INSTALL)


def test_promtool_check_rules():
    out = subprocess.run(
        [_promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_promtool_unit_tests_pass():
    assert UNIT_TESTS, "no promtool unit tests in alerts/tests"
    out = subprocess.run(
        [_promtool(), "test", "rules", *map(str, UNIT_TESTS)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr


# --- the README -----------------------------------------------------------------------------


def test_readme_lists_the_catalog():
    readme = README.read_text()
    listed = set(re.findall(r"^\| `(triage_[a-z_]+)` \|", readme, re.MULTILINE))
    assert listed == set(BY_NAME), "README's metric table and the catalog list different metrics"
    assert markdown_table() in readme, (
        "README's metric table differs from the catalog: regenerate it with "
        "`python -m triage.agent.metric_catalog`"
    )
