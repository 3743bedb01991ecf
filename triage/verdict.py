"""The verdict every analyzer returns and every face (CLI, dashboard, supervisor) reads.

Field names are the JSON contract of `triage analyze --json` and `triage classify --json`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from triage.taxonomy import DEFAULT_CONFIDENCE_THRESHOLD, Action, Category, Layer


@dataclass(frozen=True)
class Culprit:
    """Who to blame; each field is None where the evidence does not say."""

    rank: int | None = None
    node: str | None = None
    gpu: int | None = None
    uuid: str | None = None


@dataclass(frozen=True)
class Evidence:
    """One log line or metric point that decided a verdict, with where and when it was seen."""

    text: str
    source: str  # e.g. "exception", "stderr", "kernel_log", "nvml", "file:train.log"
    time: float | None = None  # unix seconds
    rank: int | None = None
    line: int | None = None  # 1-based line number when the source is a file


@dataclass
class Verdict:
    category: Category
    confidence: float
    summary: str
    culprit: Culprit = field(default_factory=Culprit)
    first_seen: float | None = None
    evidence: list[Evidence] = field(default_factory=list)
    consequences: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0.0 <= self.confidence <= 1.0:
            raise ValueError(f"confidence must lie in [0, 1], got {self.confidence}")

    @property
    def layer(self) -> Layer:
        return self.category.layer

    @property
    def action(self) -> Action:
        return self.category.action

    def thresholded(self, threshold: float = DEFAULT_CONFIDENCE_THRESHOLD) -> Verdict:
        """The taxonomy's rule: below the threshold the category is `unknown`."""
        if self.confidence >= threshold or self.category is Category.UNKNOWN:
            return self
        return Verdict(
            Category.UNKNOWN,
            self.confidence,
            f"unsure (best guess {self.category.value}): {self.summary}",
            self.culprit,
            self.first_seen,
            self.evidence,
            self.consequences,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category.value,
            "layer": self.layer.value,
            "action": self.action.value,
            "confidence": round(self.confidence, 3),
            "culprit": asdict(self.culprit),
            "first_seen": self.first_seen,
            "summary": self.summary,
            "evidence": [asdict(e) for e in self.evidence],
            "consequences": list(self.consequences),
        }
