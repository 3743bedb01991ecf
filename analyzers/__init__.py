"""Pure functions from a job snapshot to verdicts; they recommend, the supervisor acts."""
