"""The node health ledger: which nodes and GPUs are quarantined, why, and returning them.

    triage nodes                      nodes quarantined now, and recent incidents per node
    triage nodes --history            every ledger entry, oldest first
    triage nodes clear NODE [--gpu G] [--by WHO]

`triage run` quarantines a node when a verdict blames its hardware (a GPU off the bus, HBM
ECC, NVLink, a node that vanished, silent data corruption: that GPU, or the node for a lost
node) or when the node is the culprit of --repeat-count incidents within --repeat-window-days;
every later `triage run` on this data dir leaves a quarantined node out. `clear` returns it to
service once it is repaired (the node with all its GPUs, or with --gpu one GPU); on a simulated
node it also resets the simulated GPUs, as a GPU reset or a reboot would.

Exit codes: 0 listed or cleared; 1 `clear` found nothing quarantined there (nothing is
written); 2 bad usage or not a Triage data directory.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from triage import display
from triage.config import ConfigError, data_dir_from_env
from triage.fault_schedule import append_reset
from triage.names import check_name
from triage.store import check_data_dir
from triage.store.node_health import (
    QUARANTINED,
    HealthEntry,
    clear_node,
    current_state,
    read_implications,
    read_ledger,
)
from triage.supervisor.identity import current_user
from triage.supervisor.quarantine import QuarantineConfig, offences


def _common(parser: argparse.ArgumentParser, *, inherited: bool) -> None:
    """--data-dir and --json, before or after the action (`inherited`: the action's copy,
    which keeps what was given before it)."""
    keep: dict[str, Any] = {"default": argparse.SUPPRESS} if inherited else {}
    parser.add_argument(
        "--data-dir", help="Triage data directory (default: $TRIAGE_DATA_DIR or ./triage-data)", **keep
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object", **keep)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _common(parser, inherited=False)
    parser.add_argument(
        "--history",
        action="store_true",
        help="list every ledger entry (quarantines and clears), oldest first",
    )
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    clear = sub.add_parser(
        "clear",
        help="return a repaired node (or one of its GPUs) to service",
        description="Return a node, with all its GPUs, or one GPU (--gpu) to "
        "service: later `triage run`s place jobs on it again.",
    )
    clear.add_argument("node", help="the node's name as `triage nodes` lists it")
    clear.add_argument(
        "--gpu", type=int, help="clear only this GPU's quarantine (a node-level quarantine stays)"
    )
    clear.add_argument("--by", help="who returns it, for the record (default: the current user)")
    clear.add_argument(
        "--reason", default="", help="what was done to it, for the record (e.g. 'GPU 3 replaced')"
    )
    _common(clear, inherited=True)


def run(args: argparse.Namespace) -> int:
    data_dir = check_data_dir(data_dir_from_env(args.data_dir))
    if args.action == "clear":
        return _clear(data_dir, args)
    ledger = read_ledger(data_dir)
    window = QuarantineConfig()
    now = time.time()
    recent = read_implications(data_dir, now - window.window_s)
    counts = {
        node: n
        for node in sorted({i.node for i in recent})
        if (n := len(offences(node, now=now, ledger=ledger, implications=recent)))
    }
    state = current_state(ledger)
    standing = sorted(
        (e for e in state.values() if e.state == QUARANTINED),
        key=lambda e: (e.node, -1 if e.gpu is None else e.gpu),
    )
    if args.json:
        out: dict[str, object] = {
            "data_dir": str(data_dir),
            "quarantined": [e.to_dict() for e in standing],
            "incidents": counts,
            "incident_window_days": window.repeat_window_days,
        }
        if args.history:
            out["history"] = [e.to_dict() for e in ledger]
        print(json.dumps(out, default=str))
        return 0
    if args.history:
        if not ledger:
            print(f"The node health ledger of {data_dir} is empty.")
        for e in ledger:
            print(f"{display.when(e.time)}  {e.where:<14} {e.state:<11} by {e.by} ({e.source})")
            print(f"    {e.reason}")
        return 0
    if standing:
        print("Quarantined (`triage run` leaves these nodes out):")
        for e in standing:
            job = "" if e.job_id is None else f", job {e.job_id}"
            job += "" if e.attempt is None else f" attempt {e.attempt}"
            print(f"  {e.where:<14} since {display.when(e.time)} ({e.category or e.source}{job})")
            print(f"      {e.reason}")
        print("`triage nodes clear NODE` returns a repaired node to service.")
    else:
        print(f"No node is quarantined in {data_dir}.")
    if counts:
        listed = ", ".join(f"{n} {c}" for n, c in sorted(counts.items(), key=lambda kv: -kv[1]))
        print(
            f"Incidents that named a culprit node in the last {window.repeat_window_days:g} "
            f"days (since its last clear): {listed}"
        )
    return 0


def _clear(data_dir: Path, args: argparse.Namespace) -> int:
    node = check_name("node", args.node, source="NODE")
    if args.gpu is not None and args.gpu < 0:
        raise ConfigError(f"--gpu must be >= 0, got {args.gpu}")
    by = args.by or current_user()
    if args.reason:
        by = f"{by}: {args.reason}"
    ended, reset = return_to_service(data_dir, node, gpu=args.gpu, by=by)
    where = node if args.gpu is None else f"{node} GPU {args.gpu}"
    if not ended:
        known = sorted(
            {
                e.where
                for e in current_state(read_ledger(data_dir)).values()
                if e.state == QUARANTINED and e.node == node
            }
        )
        hint = (
            f"; quarantined there: {', '.join(known)}"
            if known
            else "; `triage nodes` lists what is quarantined"
        )
        msg = f"{where} is not quarantined, nothing written{hint}"
        print(json.dumps({"cleared": [], "message": msg}) if args.json else f"triage nodes clear: {msg}")
        return 1
    resumed = _resume_in_slurm(node) if args.gpu is None else None
    if args.json:
        print(
            json.dumps(
                {
                    "cleared": [e.to_dict() for e in ended],
                    "sim_reset": None if reset is None else str(reset),
                    "slurm_resumed": resumed,
                },
                default=str,
            )
        )
        return 0
    if resumed:
        print(f"resumed {node} in Slurm (Triage had drained it)")
    for e in ended:
        print(f"returned {e.where} to service (quarantined {display.when(e.time)}: {e.reason})")
    if reset is not None:
        print(f"reset the simulated GPUs of {where} (fault schedule {reset})")
    return 0


def _resume_in_slurm(node: str) -> bool | None:
    """Resume the node in Slurm where Triage drained it (`triage run --slurm-drain`); None
    where there is no Slurm here."""
    from triage.supervisor import slurm

    if not slurm.available():
        return None
    try:
        if not slurm.drained_by_triage(node):
            return False
        slurm.resume(node)
    except slurm.SlurmError as exc:
        if slurm.NOT_CONFIGURED in str(exc):
            return None  # Slurm's commands are installed, but no cluster is configured here
        print(f"triage nodes clear: warning: could not resume {node} in Slurm: {exc}", file=sys.stderr)
        return False
    return True


def return_to_service(
    data_dir: Path, node: str, *, gpu: int | None, by: str
) -> tuple[list[HealthEntry], Path | None]:
    """Clear the ledger's quarantines of (node, gpu) and, on a simulated node, reset its
    simulated GPUs: the quarantines ended ([] where none stood: then nothing changes) and the
    fault schedule the reset went to."""
    ended = clear_node(data_dir, node, gpu=gpu, by=by)
    return ended, (append_reset(data_dir, node, gpu) if ended else None)
