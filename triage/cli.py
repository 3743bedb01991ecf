"""The `triage` command line.

Subcommands are imported only when chosen, so `triage --help` stays fast and a command's heavy
imports (torch, streamlit) are paid only by that command. Exit codes (docs/architecture.md): 0 ok,
1 the job/analysis found a failure where that is the point, 2 bad usage or bad input.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from triage import __version__
from triage.config import ConfigError

#: name -> (module under triage.commands, one-line help). A module defines
#: `add_arguments(parser)`, `run(args) -> int` and a module docstring used as the description.
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("train", "run the reference FSDP2 trainer under torchrun, with fault injection"),
    "demo": ("demo", "inject a fault into a small 2-node job and watch Triage diagnose and recover"),
    "run": ("run", "run a training command under the supervisor: detect, diagnose, restart"),
    "jobs": ("jobs", "list jobs with status, attempts, ranks, steps and last progress"),
    "nodes": ("nodes", "list quarantined nodes and GPUs (node health ledger); clear a repaired one"),
    "classify": ("classify", "classify raw log files into the failure taxonomy"),
    "analyze": ("analyze", "analyse one job: root cause, hangs, stragglers, GPU health, goodput"),
    "report": (
        "report",
        "fleet reliability over all runs: ETTR, failure rates, MTTF/MTTR, lost GPU-hours by cause, lemon nodes",
    ),
    "agent": ("agent", "run the per-node agent: collectors, spool ingest, Prometheus /metrics"),
    "health-check": (
        "health_check",
        "check this node (GPUs, kernel log, ledger, disk, memory): exit 0 healthy, 1 not; a Slurm prolog gate",
    ),
    "bench": ("bench", "run a benchmark (classify, ...) and report its numbers"),
    "dashboard": (
        "dashboard",
        "serve the Streamlit reliability dashboard (fleet, job, ranks, GPUs, incidents)",
    ),
}

EXIT_OK, EXIT_FAILURE_FOUND, EXIT_USAGE = 0, 1, 2


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="triage",
        description="Reliability, observability and failure triage for distributed training.",
        epilog="Run `triage COMMAND --help` for a command's flags. Exit codes: 0 ok, "
        "1 a failure was found where that is the point, 2 bad usage or input.",
    )
    parser.add_argument("--version", action="version", version=f"triage {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name, help=help_text, add_help=False)
            continue
        module = importlib.import_module(f"triage.commands.{module_name}")
        p = sub.add_parser(
            name,
            help=help_text,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def _is_bad_input(exc: BaseException) -> bool:
    """Whether `exc` is about the data or the disk, not Triage's code: the store's errors,
    file-system errors, and DuckDB's (a segment damaged past what the readers check for).
    DuckDB is recognised by module name, so the agent, which never loads it, does not here."""
    from triage.store.manifest import ManifestError
    from triage.store.writer import PartitionBusy, StoreError

    return (
        isinstance(exc, (StoreError, PartitionBusy, ManifestError, OSError))
        or type(exc).__module__.split(".")[0].lstrip("_") == "duckdb"
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only=chosen if chosen in COMMANDS else "")
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args._run(args) or 0)
    except ConfigError as exc:
        print(f"triage {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # the reader went away (`| head`): nothing is wrong with the data
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return EXIT_OK
    except Exception as exc:
        if not _is_bad_input(exc):
            raise  # a bug: its traceback is what a report needs
        print(
            f"triage {args.command}: error: {type(exc).__name__}: {exc}. The data is damaged "
            "or out of reach (see `triage bench bad-inputs` for what is contained where); "
            "check the file named",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"triage {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
