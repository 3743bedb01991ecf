"""The built-in sharded reference workload (FSDP2 + DCP) and its fault injection."""
