"""The per-node agents of the simulated nodes: started before the job, stopped after it.

On a cluster each node runs its own agent and the supervisor starts none (`--agents none`);
for the simulated nodes of a local `triage train --nnodes N` the supervisor starts one
`triage agent --node nodeK --gpu sim` per node, so the GPU faults the trainer injects reach the
store as they would from NVML and the kernel log.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from triage.config import ENV_ATTEMPT, ENV_JOB_ID, ENV_RUN_ID, ConfigError
from triage.reference_trainer.launcher import free_port
from triage.supervisor.keeper import PR_SET_PDEATHSIG

_STOP_GRACE_S = 15.0


_LIBC = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    """In the agent's child before exec: SIGTERM (a clean stop) when the supervisor dies, even
    by SIGKILL, so no agent outlives the job it served. Only a prebuilt libc call here:
    between fork and exec nothing that could take a lock may run."""
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def simulated_nodes(command: Sequence[str]) -> list[str]:
    """node0..node{N-1} for a local `triage train --nnodes N` (no --node-rank); else none."""
    args = list(command)
    if "train" not in args or any(a.startswith("--node-rank") for a in args):
        return []
    nnodes = 1
    for i, a in enumerate(args):
        if a == "--nnodes" and i + 1 < len(args) and args[i + 1].isdigit():
            nnodes = int(args[i + 1])
        elif a.startswith("--nnodes=") and a.split("=", 1)[1].isdigit():
            nnodes = int(a.split("=", 1)[1])
    return [f"node{k}" for k in range(nnodes)]


def agent_available() -> bool:
    return importlib.util.find_spec("triage.commands.agent") is not None


class Agents:
    """One `triage agent` subprocess per node; its output goes to DATA_DIR/logs/agent-NODE.log.

    The agents store what they see every `interval_s` (not the agent's default 15 s): the
    supervisor's hang detection and verdicts read the store, so its lag is their latency."""

    def __init__(self, nodes: Sequence[str], data_dir: Path, *, gpu: str, sim_gpus: int,
                 interval_s: float) -> None:
        if nodes and not agent_available():
            raise ConfigError("`triage agent` is not installed in this build; run with "
                              "--agents none (the supervisor then ingests the spools itself)")
        self.nodes = list(nodes)
        self.procs: dict[str, subprocess.Popen] = {}
        self.ports: dict[str, int] = {}
        logs = data_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        # The agents are not part of any job: no job identity in their environment, so nothing
        # that looks for a job's processes by it (a test, an operator's ps) takes them for one.
        env = {k: v for k, v in os.environ.items()
               if k not in (ENV_JOB_ID, ENV_RUN_ID, ENV_ATTEMPT)}
        for node in self.nodes:
            port = free_port()
            cmd = [sys.executable, "-m", "triage.cli", "agent", "--data-dir", str(data_dir),
                   "--node", node, "--port", str(port), "--gpu", gpu,
                   "--interval", str(interval_s), "--store-interval", str(interval_s)]
            if gpu == "sim":
                cmd += ["--sim-gpus", str(sim_gpus)]
            with open(logs / f"agent-{node}.log", "ab") as log:
                self.procs[node] = subprocess.Popen(cmd, env=env, stdout=log,
                                                    stderr=subprocess.STDOUT,
                                                    start_new_session=True,
                                                    preexec_fn=_die_with_parent)
            self.ports[node] = port

    def pids(self) -> frozenset[int]:
        """The supervisor's children that belong to no attempt, though they share its parent."""
        return frozenset(p.pid for p in self.procs.values())

    def dead(self) -> dict[str, int]:
        """node -> exit code of agents that stopped on their own (port clash, busy partition)."""
        return {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}

    def stop(self) -> None:
        """SIGTERM (the agent does a final collect and ingest), SIGKILL after a grace period."""
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
