"""Run a training command under the Triage supervisor: automatic checkpoint-restart with node
exclusion.

    triage run [flags] -- triage train --nnodes 2 --nproc-per-node 2 --steps 50

Every attempt gets TRIAGE_JOB_ID, TRIAGE_ATTEMPT (0, 1, ...) and TRIAGE_DATA_DIR. A rank's exit
is noticed within 2 s, a fatal Xid (79, 119, 120, 48, 64, 95) on a GPU of its ranks within
about 3 s (when the agents report it), a hang from the collective stall (a rank that never
entered a collective its peers wait in, alive and idle) within seconds, else (no step
progress) within --hang-timeout; the
job is then stopped (SIGTERM, SIGKILL after --grace), the analyzers' verdict is recorded as an
incident in the store, and the taxonomy's action is taken: restart from the newest checkpoint, restart without the
culprit's node (TRIAGE_EXCLUDE_NODES), roll back before the bad step and skip its batch
(TRIAGE_RESUME_BEFORE_STEP, TRIAGE_SKIP_STEPS), requeue after a preemption, or fail fast. It
gives up after --max-restarts, or when the same failure repeats without progress.

Nodes the node health ledger holds quarantined (`triage nodes`) are left out from the start; a
verdict that blames a node's hardware (a GPU off the bus, HBM ECC, NVLink, a lost node, silent
data corruption), or a node that is the culprit of a second incident within
--repeat-window-days, quarantines it for every later job until `triage nodes clear NODE`.

Under Slurm (`--launcher slurm`, from the batch script of an sbatch/salloc allocation; `exec`
it so that Slurm's SIGTERM reaches it), each attempt is one srun step with one task per node,
a node left out is left out of the next step, too few nodes left or a preemption requeue the
job (its next incarnation goes on with the run), and --slurm-drain drains a quarantined node;
the README's "Run on Slurm" has a job script.

A script without any Triage code is observed as it is: under torchrun its ranks are
instrumented at start-up (steps from `optimizer.step()`, collectives, exceptions, exits;
--no-auto-hooks turns it off), and a job that reports no steps is never stopped as hung for the
lack of them.

Exit status: 0 the job completed; 1 it failed or the supervisor gave up; 2 bad usage;
130 interrupted (Ctrl-C or SIGTERM: the job and its agents are stopped first; under Slurm a
SIGTERM is a preemption notice instead, unless Slurm says the job was cancelled, which is
stopped and never requeued, or is at its time limit, which is said and not requeued).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

from triage.commands.report_view import print_job_report
from triage.config import ConfigError, add_config_args, config_from_args, data_dir_from_env
from triage.display import Status
from triage.supervisor.config import SupervisorConfig
from triage.supervisor.observe import MAIN_WORK_WINDOW_S
from triage.supervisor.quarantine import QuarantineConfig
from triage.supervisor.report import LiveState
from triage.supervisor.slurm import SlurmError
from triage.supervisor.supervisor import Supervisor

#: A hang timeout below this cannot see work outside steps in time: the ranks' main-thread work
#: is judged over `MAIN_WORK_WINDOW_S` of reports, which reach the store a few seconds late
SHORT_HANG_TIMEOUT_S = 2 * MAIN_WORK_WINDOW_S


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_args(parser, SupervisorConfig)
    add_config_args(parser, QuarantineConfig)
    parser.add_argument("--json", action="store_true", help="print the final report as JSON")
    parser.add_argument(
        "cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND ...", help="the training command (after --)"
    )


def print_state(state: LiveState) -> None:
    p = state.progress
    step = "-" if p.last_step is None else str(p.last_step)
    print(f"triage run: attempt {state.attempt} step {step}: {state.state}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    command = list(args.cmd)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise ConfigError(
            "give the training command after --, e.g. "
            "`triage run -- triage train --nnodes 2 --nproc-per-node 2`"
        )
    cfg = config_from_args(SupervisorConfig, args)
    if cfg.launcher == "local" and shutil.which(command[0]) is None:
        # every attempt would fail the same way at its first instruction: no restart helps
        why = (
            "it is not an executable file (chmod +x it, or run it through its interpreter)"
            if os.path.exists(command[0])
            else "no such command (not a file, nor on PATH); check its spelling, or give its full path"
        )
        raise ConfigError(f"cannot start {command[0]!r}: {why}")
    if cfg.hang_timeout is not None and cfg.hang_timeout < SHORT_HANG_TIMEOUT_S:
        print(
            f"triage run: note: --hang-timeout {cfg.hang_timeout:g} s is shorter than the "
            f"{SHORT_HANG_TIMEOUT_S:g} s it takes to see ranks working outside steps (an evaluation, "
            "a save, data preparation): such work may be stopped as a hang",
            file=sys.stderr,
        )
    data_dir = data_dir_from_env(cfg.data_dir)
    if not data_dir.exists():
        # a typo in --data-dir would start a job without the fleet's history: no node the
        # ledger holds quarantined is left out of it
        print(
            f"triage run: note: {data_dir} does not exist: starting a new data directory, with "
            "no history (no quarantined node is known to it)",
            file=sys.stderr,
        )
    supervisor = Supervisor(
        cfg,
        command,
        on_update=None if args.json else print_state,
        quarantine=config_from_args(QuarantineConfig, args),
    )
    report = supervisor.run(
        on_started=lambda: print(
            f"triage run: job {supervisor.job_id}; {supervisor.signals()}", file=sys.stderr, flush=True
        )
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=1, default=str))
    else:
        print_job_report(report)
    sys.stdout.flush()
    try:
        supervisor.requeue_if_decided()  # Slurm ends this process here when it requeues the job
    except SlurmError as exc:
        print(
            f"triage run: error: the run was to go on in a requeued job, but Slurm refused: {exc}. "
            "Submit the job again; its next run starts from the last checkpoint",
            file=sys.stderr,
        )
        return 1
    return 0 if report.status == Status.COMPLETED else 1
