"""The supervisor behind `triage run`: launch a training job, watch it, stop it cleanly on a
failure, ask the analyzers for the verdict, and act on it (restart, exclude a node, roll back,
requeue, fail fast) until the job completes or restarting stops making sense."""
