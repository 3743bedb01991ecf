"""Recovery under the supervisor: from an injected fault to the next attempt's first step, phase
by phase, for a crash, a hang and a GPU fault, on the demo's job (2 simulated nodes x 2 ranks on
loopback, node agents with simulated GPUs, tiny model, 30 steps, checkpoint every 5 steps, 15 s
collective timeout, 15 s hang timeout).

The clock starts when the fault fires: the reference trainer's fault injection notes the moment
(`reference_trainer.injection_log`; nothing in the diagnosis reads it). Phases, each from the
end of the one before:
  detect     the supervisor notices (a rank gone, the collective stall, the Xid in the store)
  stop       SIGTERM, a grace, SIGKILL: no process of the attempt left
  diagnose   the ranks' last records and the agents' GPU and kernel-log state into the store,
             then the analyzers' verdict
  backoff    the policy's wait (none where the cause is known and left behind)
  launch     the next attempt's command until its last rank process exists (the keeper, the
             launcher, torchrun)
  setup      the ranks' start: importing torch, rendezvous, process group, FSDP sharding
  load       the checkpoint, as the slowest rank loads it
  first step the first training step of the new attempt
`--compare torchrun` also runs the crash and the hang on one node of 4 ranks, under `triage
run` and under torchrun alone (`--max-restarts 1`, no supervisor, no agents; the same collective
timeout): torchrun restarts every rank on the same node when one fails, and has no hang
detection of its own, so a hang waits for the collective timeout. Its phases: until the
restarted ranks are set up, load, first step. (On the demo's 2 simulated nodes torchrun's own
restart does not come back: its re-rendezvous's gloo mesh dials a dead peer's old address.)
Exit 1 when a scenario does not recover (the job does not complete).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypedDict, cast

from triage.config import ENV_DATA_DIR, ENV_JOB_ID, ENV_RUN_ID, ConfigError, add_config_args, config_from_args
from triage.display import Status
from triage.reference_trainer.injection_log import read_injections
from triage.store import ingest_spools, open_snapshot
from triage.store.layout import spool_nodes
from triage.supervisor.identity import new_run_id
from triage.supervisor.scenarios import SCENARIOS, demo_supervisor_config
from triage.supervisor.supervisor import Supervisor

#: Scenarios torchrun alone can be run on: the ones it would restart by itself.
TORCHRUN_SCENARIOS = ("crash", "hang")
TRIAGE_PHASES = ("detect", "stop", "diagnose", "backoff", "launch", "setup", "load", "first_step")
TORCHRUN_PHASES = ("restart_and_setup", "load", "first_step")
#: (nodes, ranks per node): the demo's, and the comparison's. torchrun's own restart of a job
#: of 2 simulated nodes on one host does not come back here (the re-rendezvous's gloo mesh dials
#: a dead peer's old address), so Triage and torchrun are compared on one node of 4 ranks, where
#: Triage cannot leave a node out either: the same restart, with and without the diagnosis.
DEMO_PLACEMENT = (2, 2)
COMPARE_PLACEMENT = (1, 4)
#: How long a job under torchrun alone may take before it counts as not recovered.
TORCHRUN_TIMEOUT_S = 300


@dataclass
class RecoveryBenchConfig:
    scenarios: str = field(
        default="crash,hang,gpu-lost", metadata={"help": "comma-separated demo scenarios to measure"}
    )
    compare: str | None = field(
        default=None,
        metadata={
            "help": "also run the crash and the hang without Triage: `torchrun` (its own "
            "--max-restarts 1, the same collective timeout)",
            "choices": ["torchrun"],
        },
    )
    data_dir: str | None = field(
        default=None,
        metadata={"help": "keep the runs here (default: a temporary directory, removed afterwards)"},
    )
    placement: str = field(
        default="2x2",
        metadata={
            "help": "NODESxRANKS of the scenarios under triage run (default: the demo's 2x2); a "
            "culprit rank the placement lacks moves to its node and local index, clamped, e.g. 2x1 "
            "shows a pair (one rank per node: a core per process on this machine)",
            "metavar": "NxR",
        },
    )

    def __post_init__(self) -> None:
        unknown = [s for s in self.scenarios.split(",") if s not in SCENARIOS]
        if unknown:
            raise ConfigError(
                f"--scenarios: unknown {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}"
            )
        self.nodes_ranks()

    def nodes_ranks(self) -> tuple[int, int]:
        nodes, x, ranks = self.placement.lower().partition("x")
        if not (x and nodes.isdigit() and ranks.isdigit() and int(nodes) >= 1 and int(ranks) >= 1):
            raise ConfigError(f"--placement {self.placement!r}: write NODESxRANKS, e.g. 2x2 or 2x1")
        if int(nodes) * int(ranks) < 2:
            raise ConfigError(
                f"--placement {self.placement!r}: a fault needs at least 2 ranks to recover from"
            )
        return int(nodes), int(ranks)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_args(parser, RecoveryBenchConfig)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


class Timeline(TypedDict):
    scenario: str
    runner: str  # "triage" or "torchrun"
    placement: str
    job_id: str
    status: str
    wall_s: float
    verdict: str | None
    culprit: dict[str, Any] | None
    action: str | None
    excluded_nodes: list[str]
    #: phase -> seconds; the phases add up to recover_s where every milestone is known
    phases: dict[str, float | None]
    detect_s: float | None
    recover_s: float | None  # the fault to the end of the next attempt's first step
    steps_lost: int | None
    goodput_ratio: float | None


_MILESTONES_SQL = """
SELECT attempt,
       (SELECT max(start_time) FROM ranks r WHERE r.job_id = $job AND r.run_id = $run
          AND r.attempt = e.attempt) AS ranks_ready,
       max(time) FILTER (WHERE kind = 'checkpoint_load_end') AS loaded,
       (SELECT min(end_time) FROM steps s WHERE s.job_id = $job AND s.run_id = $run
          AND s.attempt = e.attempt) AS first_step_end,
       (SELECT min(step) FROM steps s WHERE s.job_id = $job AND s.run_id = $run
          AND s.attempt = e.attempt) AS first_step,
       (SELECT max(step) FROM steps s WHERE s.job_id = $job AND s.run_id = $run
          AND s.attempt = e.attempt) AS last_step
FROM events e
WHERE job_id = $job AND run_id = $run
GROUP BY attempt
"""


def _milestones(data_dir: Path, job_id: str, run_id: str) -> dict[int, dict[str, float | None]]:
    """Per attempt, from the ranks' own records: when the slowest rank was set up (its hooks
    started: after import, rendezvous and sharding), had loaded the checkpoint, and when the
    first step ended."""
    with open_snapshot(data_dir) as snap:
        rows = snap.con.execute(_MILESTONES_SQL, {"job": job_id, "run": run_id}).fetchall()
    return {
        int(a): {
            "ranks_ready": ready,
            "loaded": loaded,
            "first_step_end": first,
            "first_step": step,
            "last_step": last,
        }
        for a, ready, loaded, first, step, last in rows
    }


def _spans(points: list[tuple[str, float | None]]) -> dict[str, float | None]:
    """Phase name -> seconds from the previous known point to its own (None where unknown);
    a phase with no milestone of its own (no checkpoint loaded) takes no time."""
    out: dict[str, float | None] = {}
    prev: float | None = points[0][1]
    for name, at in points[1:]:
        out[name] = None if at is None or prev is None else round(max(0.0, at - prev), 3)
        prev = at if at is not None else prev
    return out


def _fault_time(data_dir: Path, job_id: str, run_id: str) -> float | None:
    first = read_injections(data_dir, job_id, run_id)
    return first[0].time if first else None


def measure_triage(name: str, data_dir: Path, placement: tuple[int, int] = DEMO_PLACEMENT) -> Timeline:
    scenario = SCENARIOS[name]
    job_id = f"bench-recovery-{name}-{int(time.time())}"
    cfg = demo_supervisor_config(job_id, str(data_dir), echo_output=False)
    started = time.time()
    command = scenario.train_command(nnodes=placement[0], nproc_per_node=placement[1])
    report = Supervisor(cfg, command).run()
    wall = time.time() - started
    fault = _fault_time(data_dir, job_id, report.run_id)
    failed = report.attempts[0]
    nxt = report.attempts[1] if len(report.attempts) > 1 else None
    later = _milestones(data_dir, job_id, report.run_id).get(1, {}) if nxt else {}
    points: list[tuple[str, float | None]] = [
        ("fault", fault),
        ("detect", failed.detected_at),
        ("stop", failed.ended),
        ("diagnose", failed.diagnosed_at),
        ("backoff", nxt.started if nxt else None),
        ("launch", nxt.ranks_seen_at if nxt else None),
        ("setup", later.get("ranks_ready")),
        ("load", later.get("loaded")),
        ("first_step", nxt.first_step_end if nxt else None),
    ]
    verdict = failed.verdict or {}
    resumed = None if nxt is None else nxt.resumed_from_step
    timeline: dict[str, Any] = {
        **_common(name, "triage", placement, job_id, report.status, wall, fault, points),
        "verdict": verdict.get("category"),
        "culprit": verdict.get("culprit"),
        "action": failed.action,
        "excluded_nodes": report.excluded_nodes,
        "detect_s": None
        if failed.detected_at is None or fault is None
        else round(failed.detected_at - fault, 3),
        "steps_lost": None if resumed is None or failed.last_step is None else failed.last_step - resumed,
        "goodput_ratio": ((report.analysis or {}).get("goodput") or {}).get("ratio"),
    }
    return cast(Timeline, timeline)


def measure_torchrun(name: str, data_dir: Path, placement: tuple[int, int] = COMPARE_PLACEMENT) -> Timeline:
    """The scenario's job under torchrun alone: `--max-restarts 1`, no supervisor, no agents;
    the ranks' spools are stored afterwards, to read the same milestones from."""
    scenario = SCENARIOS[name]
    job_id = f"bench-torchrun-{name}-{int(time.time())}"
    run_id = new_run_id()
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, ENV_DATA_DIR: str(data_dir), ENV_JOB_ID: job_id, ENV_RUN_ID: run_id}
    command = scenario.train_command(
        nnodes=placement[0],
        nproc_per_node=placement[1],
        extra=("--max-restarts", "1", "--run-dir", str(data_dir / "run")),
    )
    started = time.time()
    with open(data_dir / f"{job_id}.log", "wb") as log:
        proc = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            returncode: int | None = proc.wait(timeout=TORCHRUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            # torchrun's own restart can fail to come back (a re-rendezvous whose gloo mesh
            # dials a dead peer's old address, then waits): what a user would wait for
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            returncode = None
    wall = time.time() - started
    for node in spool_nodes(data_dir):
        ingest_spools(data_dir, node)
    marks = _milestones(data_dir, job_id, run_id)
    fault = _fault_time(data_dir, job_id, run_id)
    first, later = marks.get(0, {}), marks.get(1, {})
    points: list[tuple[str, float | None]] = [
        ("fault", fault),
        ("restart_and_setup", later.get("ranks_ready")),
        ("load", later.get("loaded")),
        ("first_step", later.get("first_step_end")),
    ]
    last, resumed_at = first.get("last_step"), later.get("first_step")
    timeline: dict[str, Any] = {
        **_common(
            name,
            "torchrun",
            placement,
            job_id,
            {0: Status.COMPLETED, None: "timed_out"}.get(returncode, Status.FAILED),
            wall,
            fault,
            points,
        ),
        "verdict": None,
        "culprit": None,
        "action": "restart" if later else None,
        "excluded_nodes": [],
        "detect_s": None,
        "steps_lost": None if last is None or resumed_at is None else int(last) - (int(resumed_at) - 1),
        "goodput_ratio": None,
    }
    return cast(Timeline, timeline)


def _common(
    name: str,
    runner: str,
    placement: tuple[int, int],
    job_id: str,
    status: str,
    wall: float,
    fault: float | None,
    points: list[tuple[str, float | None]],
) -> dict[str, Any]:
    end = points[-1][1]
    return {
        "scenario": name,
        "runner": runner,
        "placement": f"{placement[0]} node(s) x {placement[1]} ranks",
        "job_id": job_id,
        "status": status,
        "wall_s": round(wall, 1),
        "phases": _spans(points),
        "recover_s": None if end is None or fault is None else round(end - fault, 3),
    }


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(RecoveryBenchConfig, args)
    names = cfg.scenarios.split(",")
    with tempfile.TemporaryDirectory(prefix="triage-bench-recovery-") as tmp:
        root = Path(cfg.data_dir or tmp)
        # One data dir per run: a GPU one scenario loses stays quarantined in its data dir, and
        # would change where the next scenario runs.
        results = []
        for name in names:
            print(f"recovery: {name} under triage run ...", file=sys.stderr, flush=True)
            results.append(measure_triage(name, root / name, cfg.nodes_ranks()))
            _print_table(results[-1:], file=sys.stderr)
        if cfg.compare == "torchrun":
            for name in [n for n in names if n in TORCHRUN_SCENARIOS]:
                print(f"recovery: {name} on one node, under triage run ...", file=sys.stderr, flush=True)
                results.append(measure_triage(name, root / f"one-node-{name}", COMPARE_PLACEMENT))
                _print_table(results[-1:], file=sys.stderr)
                print(f"recovery: {name} on one node, under torchrun alone ...", file=sys.stderr, flush=True)
                results.append(measure_torchrun(name, root / f"torchrun-{name}"))
                _print_table(results[-1:], file=sys.stderr)
    if args.json:
        print(json.dumps({"benchmark": "recovery", "results": results}, indent=1))
    else:
        _print_table(results)
    return 0 if all(r["status"] == Status.COMPLETED for r in results) else 1


def _print_table(results: list[Timeline], file: TextIO = sys.stdout) -> None:
    def sec(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    for r in results:
        culprit = r["culprit"] or {}
        where = ", ".join(f"{k} {culprit[k]}" for k in ("rank", "node", "gpu") if culprit.get(k) is not None)
        print(
            f"{r['scenario']} on {r['placement']} under {r['runner']}: {r['status']}; "
            + (f"verdict {r['verdict']} ({where}) -> {r['action']}; " if r["runner"] == "triage" else "")
            + f"fault -> next first step {sec(r['recover_s'])} s"
            + (f" (detected after {sec(r['detect_s'])} s)" if r["runner"] == "triage" else "")
            + f", steps lost {r['steps_lost'] if r['steps_lost'] is not None else '-'}",
            file=file,
        )
        print("    " + "  ".join(f"{k} {sec(v)}" for k, v in r["phases"].items()), file=file)
    by = {(r["scenario"], r["runner"], r["placement"]): r for r in results}
    for name in TORCHRUN_SCENARIOS:
        where = f"{COMPARE_PLACEMENT[0]} node(s) x {COMPARE_PLACEMENT[1]} ranks"
        ours, theirs = by.get((name, "triage", where)), by.get((name, "torchrun", where))
        if ours and theirs and ours["recover_s"] and theirs["recover_s"]:
            print(
                f"{name}: torchrun alone {theirs['recover_s']:.1f} s, Triage {ours['recover_s']:.1f} s "
                f"(x{theirs['recover_s'] / ours['recover_s']:.2f})",
                file=file,
            )
