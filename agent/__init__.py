"""The per-node daemon: schedules collectors, ingests rank spools, serves Prometheus /metrics."""
