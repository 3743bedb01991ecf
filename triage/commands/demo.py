"""The Triage demo: a small training job on 2 simulated nodes x 2 ranks on loopback, with node
agents and simulated GPUs, run under the supervisor (`triage run`), one injected fault, automatic
recovery, then the `triage analyze` report.

Default scenario `gpu-lost`: a GPU falls off the bus (Xid 79) under rank 3 mid-run; the other
ranks block in a collective; the node's agent reports the Xid and Triage stops the attempt at
once (before any timeout), names gpu_fallen_off_bus with that rank, node and GPU as the
culprit, restarts without that node from the last checkpoint at the smaller world size, and
the job finishes. `--list` shows the others.
For the demo the job uses a 15 s collective timeout and a 15 s hang timeout (NCCL's default
watchdog is 10 minutes), so a scenario takes 1-3 minutes on a 2-core machine.

Exit status: 0 the job completed (for fail-fast scenarios: the supervisor stopped it as
expected); 1 it did not; 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from triage.commands.nodes import return_to_service
from triage.commands.report_view import print_analysis, print_job_report
from triage.config import ConfigError, data_dir_from_env
from triage.display import Status
from triage.store.layout import run_log_dir
from triage.store.node_health import quarantined_nodes
from triage.supervisor.agents import simulated_nodes
from triage.supervisor.observe import analyze
from triage.supervisor.report import LiveState
from triage.supervisor.scenarios import DEFAULT_SCENARIO, SCENARIOS, demo_supervisor_config
from triage.supervisor.supervisor import Supervisor
from triage.taxonomy import Action


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenario",
        default=DEFAULT_SCENARIO,
        metavar="NAME",
        help="the fault to inject (default: %(default)s; --list shows all)",
    )
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument(
        "--data-dir", help="site data directory (default: env TRIAGE_DATA_DIR, else ./triage-data)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the supervisor's report as JSON instead of tables"
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="stream the ranks' own output (tracebacks, torchrun's messages) as it comes; by "
        "default it is only kept in the run's log files, whose folder is printed",
    )


def _list(console: Console) -> None:
    table = Table(title="triage demo scenarios")
    for col in ("scenario", "what happens", "expected verdict", "action"):
        table.add_column(col)
    for s in SCENARIOS.values():
        table.add_row(
            s.name + (" (default)" if s.name == DEFAULT_SCENARIO else ""),
            s.what,
            s.category.value if s.category else "(whatever the evidence says)",
            s.action.value if s.action else "keep running (alert)",
        )
    console.print(table)


def _rank_states(state: LiveState) -> str:
    """`4 running` or `3 of 4 running; exited: 3` (rank processes, as the supervisor sees them)."""
    seen, running = state.ranks_seen, state.ranks_running
    if not seen:
        return "-"
    gone = sorted(set(seen) - set(running))
    if not gone:
        return f"{len(running)} running"
    return f"{len(running)} of {len(seen)} running; exited: {', '.join(map(str, gone))}"


def _live_view(job_id: str, scenario: str, state: LiveState | None, started: float) -> Table:
    table = Table(title=f"triage demo [{scenario}]: job {job_id}", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("elapsed", f"{time.time() - started:.0f} s")
    if state is not None:
        p = state.progress
        table.add_row("attempt", str(state.attempt))
        table.add_row("state", state.state)
        table.add_row("step", "-" if p.last_step is None else str(p.last_step))
        table.add_row("ranks", _rank_states(state))
        table.add_row("throughput", f"{p.tokens_per_s:,.0f} tokens/s" if p.tokens_per_s else "-")
        table.add_row("excluded nodes", ", ".join(state.excluded_nodes) or "-")
        table.add_row("incidents", "\n".join(state.incidents) or "-")
    return table


#: How a demo's job ids begin: the quarantines it may undo are the ones its own jobs made.
DEMO_JOB_PREFIX = "demo-"


def _return_demo_nodes(data_dir: Path, command: list[str]) -> list[str]:
    """An earlier demo in this data dir quarantined a simulated node (the GPU it lost): the
    demo's nodes are its own, so it returns them to service, as `triage nodes clear` would,
    instead of running this scenario on fewer nodes. What it did, one line per node."""
    if not data_dir.is_dir():
        return []
    lines = []
    for node in simulated_nodes(command):
        standing = quarantined_nodes(data_dir).get(node)
        if not standing:
            continue
        others = sorted(
            {e.job_id or "?" for e in standing if not (e.job_id or "").startswith(DEMO_JOB_PREFIX)}
        )
        if others:
            # a quarantine no demo made (a drill or a real job named its nodes node0, node1):
            # a person returns that hardware to service, not the demo
            lines.append(
                f"{node} is quarantined by job(s) {', '.join(others)}, not by a demo: the demo leaves "
                f"it out (`triage nodes clear {node}` returns it; or give the demo another --data-dir)"
            )
            continue
        ended, _ = return_to_service(data_dir, node, gpu=None, by="triage demo")
        lines.append(
            f"{node} was quarantined by an earlier demo ({ended[0].reason}); "
            "the demo returns its simulated node to service first"
        )
    return lines


def run(args: argparse.Namespace) -> int:
    console = Console()
    if args.list:
        _list(console)
        return 0
    scenario = SCENARIOS.get(args.scenario)
    if scenario is None:
        raise ConfigError(f"--scenario {args.scenario!r}: choose one of {', '.join(SCENARIOS)}")
    data_dir = data_dir_from_env(args.data_dir)
    job_id = time.strftime(f"{DEMO_JOB_PREFIX}{scenario.name}-%Y%m%d-%H%M%S", time.gmtime())
    cfg = demo_supervisor_config(job_id, str(data_dir), echo_output=args.verbose and not args.json)
    returned = _return_demo_nodes(data_dir, scenario.train_command())
    started = time.time()
    if args.json:
        for line in returned:
            print(line, file=sys.stderr)
        report = Supervisor(cfg, scenario.train_command()).run()
        print(json.dumps(report.to_dict(), indent=1, default=str))
    else:
        for line in returned:
            console.print(f"[dim]{line}[/]")
        console.print(f"[bold]triage demo[/]: {scenario.what}")
        console.print(
            "  triage run --hang-timeout 15 -- triage train --nnodes 2 "
            "--nproc-per-node 2 --collective-timeout 15 " + " ".join(f"--inject {s}" for s in scenario.inject)
        )
        with Live(
            _live_view(job_id, scenario.name, None, started),
            console=console,
            refresh_per_second=2,
            transient=False,
        ) as live:
            report = Supervisor(
                cfg,
                scenario.train_command(),
                on_update=lambda s: live.update(_live_view(job_id, scenario.name, s, started)),
            ).run()
        console.print()
        console.print(f"[dim]the ranks' output: {run_log_dir(data_dir, job_id, report.run_id)}/[/]")
        console.rule("triage run: the supervisor's report")
        print_job_report(report, console)
        analysis = analyze(data_dir, job_id, report.run_id)
        if analysis is not None:
            console.rule("triage analyze " + job_id)
            print_analysis(analysis, console)
        console.print(
            Group(
                f"took {time.time() - started:.0f} s. Explore it:",
                f"  triage analyze {job_id} --data-dir {data_dir}",
                f"  triage dashboard --data-dir {data_dir}",
            )
        )
    expected_stop = scenario.action is Action.FAIL_FAST and report.status == Status.FAILED
    return 0 if report.status == Status.COMPLETED or expected_stop else 1
