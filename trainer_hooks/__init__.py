"""Training-side telemetry: what runs inside each rank and hands records to the per-rank spool."""
