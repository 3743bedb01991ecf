"""The benchmarks behind `triage bench`."""
