"""Triage: reliability, observability and failure triage for distributed training."""

__version__ = "0.1.0"
