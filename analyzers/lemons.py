"""Lemon nodes: nodes implicated in far more failures than their share of the fleet's time.

Meta's research-cluster study found a few "lemon" nodes behind a large share of job failures;
removing them raised the fleet's reliability more than any other single fix. A node that ran
more jobs is implicated in more failures by chance alone, so the count must be set against its
exposure: given K failures across the fleet with a culprit node, node n's count is
Binomial(K, p_n) under the hypothesis that every node fails alike, with p_n its share of the
fleet's node-hours. It is a lemon when

    P(X >= k_n) < alpha / N   (one-sided exact binomial test, Bonferroni over the N nodes)

and k_n >= min_failures, so that a node with two failures in a quiet week is never flagged. Only
failures whose cause implicates the node count (`taxonomy.implicates_node`, the rule the
repeat-offender quarantine uses): a user's bug names the node its rank ran on, not a fault of it.
A node's failures and hours from before its last `triage nodes clear` do not count: a person
repaired it since.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from triage.config import ConfigError
from triage.taxonomy import Category, implicates_node

#: Stored category names that count against the culprit's node.
IMPLICATING = frozenset(c.value for c in Category if implicates_node(c))


@dataclass(frozen=True)
class LemonTest:
    alpha: float = 0.01
    min_failures: int = 3

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ConfigError(f"--lemon-alpha must be in (0, 1), got {self.alpha}")
        if self.min_failures < 1:
            raise ConfigError(f"--lemon-min-failures must be >= 1, got {self.min_failures}")


@dataclass(frozen=True)
class NodeRisk:
    node: str
    failures: int  # failures with this node as the culprit
    node_hours: float
    expected: float  # failures its share of node-hours predicts
    p_value: float  # P(X >= failures) under the fleet's common rate
    lemon: bool

    @property
    def rate_ratio(self) -> float | None:
        return self.failures / self.expected if self.expected > 0 else None

    def to_dict(self) -> dict[str, object]:
        return {
            "node": self.node,
            "failures": self.failures,
            "node_hours": round(self.node_hours, 3),
            "expected": round(self.expected, 4),
            "rate_ratio": None if self.rate_ratio is None else round(self.rate_ratio, 2),
            "p_value": self.p_value,
            "lemon": self.lemon,
        }

    @property
    def evidence(self) -> str:
        ratio = "" if self.rate_ratio is None else f", {self.rate_ratio:.1f}x its share"
        return (
            f"culprit of {self.failures} failures in {self.node_hours:.1f} node-hours against "
            f"{self.expected:.2f} expected{ratio} (one-sided binomial p={self.p_value:.1e})"
        )


def binomial_sf(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed in log space from k up until the terms vanish
    (they fall geometrically past the mean, and k is past it for any node worth testing)."""
    if k <= 0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    total = 0.0
    for i in range(k, n + 1):
        log_term = (
            math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
        )
        term = math.exp(log_term)
        total += term
        if i > n * p and term < total * 1e-16:
            break
    return min(1.0, total)


def node_risks(
    failures: Mapping[str, int], node_hours: Mapping[str, float], test: LemonTest
) -> list[NodeRisk]:
    """Every node that ran anything, riskiest first. A culprit node with no recorded hours
    (it ran before the window) is still tested, with its exposure taken as nil."""
    nodes = set(node_hours) | set(failures)
    total_hours = sum(node_hours.values())
    total = sum(failures.values())
    out = []
    for node in nodes:
        hours = node_hours.get(node, 0.0)
        k = failures.get(node, 0)
        share = hours / total_hours if total_hours > 0 else 0.0
        p_value = binomial_sf(k, total, share) if k else 1.0
        lemon = k >= test.min_failures and p_value < test.alpha / max(1, len(nodes))
        out.append(NodeRisk(node, k, hours, total * share, p_value, lemon))
    return sorted(out, key=lambda r: (r.p_value, -r.failures, r.node))
