"""Recovery under the supervisor: time to detect and time to recover for a crash, a hang and a
GPU fault, steps lost, and the goodput of each run, on the demo's job (2 simulated nodes x 2
ranks on loopback, node agents with simulated GPUs, tiny model, 30 steps, checkpoint every 5
steps, 15 s collective timeout, 15 s hang timeout).

Per scenario (`triage demo --list` describes them): detect = from the fault (the rank's exit
where that is what the supervisor detected, else the verdict's first evidence, never before the
last step completed) to the supervisor's detection; recover = from the fault to the end of the
first step of the next attempt (stop, diagnosis, backoff, restart, checkpoint load, one step);
steps lost = the failed attempt's last step minus the step the next attempt resumed from.
Goodput is the analyzers' (productive step time / the job's whole wall time across attempts).
Exit 1 when a scenario does not recover (the job does not complete).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from triage.config import ConfigError, add_config_args, config_from_args
from triage.display import Status
from triage.supervisor.scenarios import SCENARIOS, demo_supervisor_config
from triage.supervisor.supervisor import Supervisor


@dataclass
class RecoveryBenchConfig:
    scenarios: str = field(
        default="crash,hang,gpu-lost", metadata={"help": "comma-separated demo scenarios to measure"}
    )
    data_dir: str | None = field(
        default=None,
        metadata={"help": "keep the runs here (default: a temporary directory, removed afterwards)"},
    )

    def __post_init__(self) -> None:
        unknown = [s for s in self.scenarios.split(",") if s not in SCENARIOS]
        if unknown:
            raise ConfigError(
                f"--scenarios: unknown {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}"
            )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_args(parser, RecoveryBenchConfig)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


class ScenarioResult(TypedDict):
    scenario: str
    job_id: str
    status: str
    wall_s: float
    verdict: str | None
    action: str | None
    excluded_nodes: list[str]
    recoveries: list[dict[str, Any]]
    goodput_ratio: float | None
    badput_s: float | None


def measure(name: str, data_dir: Path) -> ScenarioResult:
    scenario = SCENARIOS[name]
    job_id = f"bench-recovery-{name}-{int(time.time())}"
    cfg = demo_supervisor_config(job_id, str(data_dir))
    started = time.time()
    report = Supervisor(cfg, scenario.train_command()).run()
    goodput = (report.analysis or {}).get("goodput") or {}
    first = report.attempts[0]
    return {
        "scenario": name,
        "job_id": job_id,
        "status": report.status,
        "wall_s": round(time.time() - started, 1),
        "verdict": (first.verdict or {}).get("category"),
        "action": first.action,
        "excluded_nodes": report.excluded_nodes,
        "recoveries": report.recoveries(),
        "goodput_ratio": goodput.get("ratio"),
        "badput_s": goodput.get("badput"),
    }


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(RecoveryBenchConfig, args)
    with tempfile.TemporaryDirectory(prefix="triage-bench-recovery-") as tmp:
        data_dir = Path(cfg.data_dir or tmp)
        # One data dir per scenario: a GPU one scenario loses stays quarantined in its data
        # dir, and would change where the next scenario runs.
        results = [measure(name, data_dir / name) for name in cfg.scenarios.split(",")]
    if args.json:
        print(json.dumps({"benchmark": "recovery", "results": results}, indent=1))
    else:
        for r in results:
            rec = r["recoveries"][0] if r["recoveries"] else {}
            print(
                f"{r['scenario']:<10} {r['status']:<10} verdict {r['verdict']} -> {r['action']}; "
                f"detect {rec.get('detect_s', '-')} s ({rec.get('detection', '-')}), "
                f"recover {rec.get('recover_s', '-')} s, steps lost {rec.get('steps_lost', '-')},"
                f" goodput {r['goodput_ratio']}, wall {r['wall_s']} s"
            )
    return 0 if all(r["status"] == Status.COMPLETED for r in results) else 1
