"""Generate deploy/kubernetes/prometheus-rule.yaml from alerts/triage-rules.yml.

The alert rules have one source, `alerts/triage-rules.yml` (promtool checks and unit-tests it).
The Prometheus Operator loads rules from PrometheusRule objects instead of rule files, so this
script wraps the file's `groups` unchanged into one PrometheusRule manifest. Run it after every
edit of the rules; `tests/test_kubernetes_manifests.py` fails while the two differ:

    .venv/bin/python deploy/kubernetes/generate.py           # rewrite prometheus-rule.yaml
    .venv/bin/python deploy/kubernetes/generate.py --check   # exit 1 when it is out of date

Needs PyYAML (in the `test` extra).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RULES = ROOT / "alerts" / "triage-rules.yml"
OUTPUT = HERE / "prometheus-rule.yaml"
REGENERATE = ".venv/bin/python deploy/kubernetes/generate.py"

#: The object's name and labels; a Prometheus whose `ruleSelector` selects on other labels gets
#: them from a kustomize overlay (README, "Run on Kubernetes").
NAME = "triage"
LABELS = {"app.kubernetes.io/name": "triage", "app.kubernetes.io/part-of": "triage"}

HEADER = f"""\
# GENERATED from alerts/triage-rules.yml by deploy/kubernetes/generate.py: do not edit.
# Edit the rules there, then regenerate with `{REGENERATE}`
# (tests/test_kubernetes_manifests.py fails while this file differs from what it generates).
"""


class _Dumper(yaml.SafeDumper):  # type: ignore[misc]  # PyYAML ships no types
    """Block style throughout; multi-line strings (PromQL written as `|` or `>-` blocks) as
    literal blocks, so the manifest reads like the rules file."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def load_rules(path: Path = RULES) -> dict[str, Any]:
    rules = yaml.safe_load(path.read_text())
    if not isinstance(rules, dict) or not isinstance(rules.get("groups"), list):
        raise SystemExit(f"{path}: expected a Prometheus rule file with a `groups` list")
    return rules


def manifest(rules: dict[str, Any]) -> dict[str, Any]:
    """The PrometheusRule object holding `rules`' groups as they are."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": NAME, "labels": dict(LABELS)},
        "spec": {"groups": rules["groups"]},
    }


def render(rules_path: Path = RULES) -> str:
    body: str = yaml.dump(
        manifest(load_rules(rules_path)),
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1_000_000,  # no folding: one rule field per line, as in the rules file
    )
    return HEADER + body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--check", action="store_true", help=f"exit 1 when {OUTPUT.name} differs from what would be generated"
    )
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUTPUT.is_file() or OUTPUT.read_text() != text:
            print(
                f"{_shown(OUTPUT)} is out of date with {_shown(RULES)}; regenerate it with `{REGENERATE}`",
                file=sys.stderr,
            )
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {_shown(OUTPUT)} ({len(load_rules()['groups'])} rule groups)")
    return 0


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


if __name__ == "__main__":
    sys.exit(main())
