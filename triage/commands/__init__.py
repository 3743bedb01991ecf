"""One module per `triage` subcommand: `add_arguments(parser)` and `run(args) -> int`."""
