"""The per-node agents of the simulated nodes: started before the job, stopped after it.

On a cluster each node runs its own agent and the supervisor starts none (`--agents none`);
for the simulated nodes of a local `triage train --nnodes N` the supervisor starts one
`triage agent --node nodeK --gpu sim` per node, so the GPU faults the trainer injects reach the
store as they would from NVML and the kernel log.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from triage import display
from triage.agent.node_agent import resolve_gpu_backend
from triage.config import ENV_ATTEMPT, ENV_JOB_ID, ENV_RUN_ID, ConfigError
from triage.fault_schedule import GPU_FAULT_KINDS
from triage.ports import free_port
from triage.store.layout import agent_flush_mark, scrape_targets_file
from triage.store.writer import partition_holder
from triage.supervisor.keeper import PR_SET_PDEATHSIG

log = logging.getLogger(__name__)

_STOP_GRACE_S = 15.0
#: Least time between two starts of one node's agent (one that exits at once must not spin).
_RESTART_S = 5.0


_LIBC = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    """In the agent's child before exec: SIGTERM (a clean stop) when the supervisor dies, even
    by SIGKILL, so no agent outlives the job it served. Only a prebuilt libc call here:
    between fork and exec nothing that could take a lock may run."""
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _train_count(args: Sequence[str], flag: str) -> int | None:
    """The last count a `triage train` command gives `flag` (`--flag N` or `--flag=N`)."""
    found = None
    for i, a in enumerate(args):
        value = args[i + 1] if a == flag and i + 1 < len(args) else None
        if a.startswith(flag + "="):
            value = a.split("=", 1)[1]
        if value is not None and value.isdigit():
            found = int(value)
    return found


def simulated_nodes(command: Sequence[str]) -> list[str]:
    """node0..node{N-1} for a local `triage train --nnodes N` (no --node-rank); else none."""
    args = list(command)
    if "train" not in args or any(a.startswith("--node-rank") for a in args):
        return []
    return [f"node{k}" for k in range(_train_count(args, "--nnodes") or 1)]


def agent_gpu_source(choice: str, command: Sequence[str]) -> str:
    """The agents' `--gpu` for the supervisor's `--agent-gpu`. `auto`: the reference trainer's
    GPU faults (`--inject xid@...`) are the simulator's to play, so such a run, or one on a node
    without NVML, samples simulated GPUs; any other command's agents decide for their own node
    (NVML where it initialises, else none: a script on a machine without NVML has no GPU health
    to show, and simulated GPUs would put invented ones in its reports)."""
    if choice != "auto":
        return choice
    if not _is_reference_trainer(command):
        return "auto"
    injects_gpu_faults = any(
        a.split("=", 1)[-1].split("@", 1)[0] in GPU_FAULT_KINDS
        for i, a in enumerate(command)
        if a.startswith("--inject=") or (i > 0 and command[i - 1] == "--inject")
    )
    if injects_gpu_faults or resolve_gpu_backend("auto") != "nvml":
        return "sim"
    return "auto"


def _is_reference_trainer(command: Sequence[str]) -> bool:
    """`triage train ...` however it is started (`triage`, a path to it, `python -m triage.cli`),
    or the trainer's own module: not any command with a `train` argument."""
    args = list(command)
    if any(a.startswith("triage.reference_trainer") for a in args):
        return True
    return any(
        (a == "triage" or a.endswith("/triage") or a == "triage.cli") and args[i + 1 : i + 2] == ["train"]
        for i, a in enumerate(args)
    )


def simulated_gpus_per_node(command: Sequence[str]) -> int | None:
    """The ranks per node of a local `triage train` (`--nproc-per-node N`), each on a GPU of
    its own: the simulated GPUs its node's agent must have for a fault on any of them to be
    seen; None where the command does not say."""
    args = list(command)
    return _train_count(args, "--nproc-per-node") if "train" in args else None


def agent_available() -> bool:
    return importlib.util.find_spec("triage.commands.agent") is not None


class Agents:
    """One `triage agent` subprocess per node; its output goes to DATA_DIR/logs/agent-NODE.log.

    The agents store what they see every `interval_s` (not the agent's default 15 s): the
    supervisor's hang detection and verdicts read the store, so its lag is their latency.

    Only one agent can write a node's partition. Where another job's supervisor on the same
    data dir already runs one for a node, that agent serves both jobs (it ingests every spool
    of its node and samples its GPUs); this job's agent for the node starts once the partition
    is free (`tend`), so the node is not left without one when the other job ends."""

    def __init__(
        self,
        nodes: Sequence[str],
        data_dir: Path,
        *,
        gpu: str,
        sim_gpus: int,
        interval_s: float,
        place: Callable[[list[str], str], list[str]] | None = None,
    ) -> None:
        """`place`: how a node's agent command reaches that node (Slurm: an `srun --overlap`
        step on it); None runs it here."""
        if nodes and not agent_available():
            raise ConfigError(
                "`triage agent` is not installed in this build; run with "
                "--agents none (the supervisor then ingests the spools itself)"
            )
        self.nodes = list(nodes)
        self.data_dir = data_dir
        self.gpu, self.sim_gpus, self.interval_s = gpu, sim_gpus, interval_s
        self.place = place
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.ports: dict[str, int] = {}
        self._next_start: dict[str, float] = {}
        self._waiting: set[str] = set()
        self._started: dict[str, float] = {}  # node -> when its agent of ours was started
        (data_dir / "logs").mkdir(parents=True, exist_ok=True)
        self.tend()

    def tend(self) -> None:
        """Start the agent of every node that has none running and whose partition is free;
        a node another process holds waits (noted once in its log) and is tried again on a
        later call, at most every `_RESTART_S`."""
        now = time.monotonic()
        for node in self.nodes:
            proc = self.procs.get(node)
            if (proc is not None and proc.poll() is None) or now < self._next_start.get(node, 0):
                continue
            self._next_start[node] = now + _RESTART_S
            holder = partition_holder(self.data_dir, node)
            if holder is not None:
                if node not in self._waiting:
                    self._waiting.add(node)
                    self._note(
                        node,
                        f"partition {node} is written by process {holder} (another "
                        "job's agent, normally); it serves this job too, and this "
                        "job's agent starts when it stops",
                    )
                continue
            self._waiting.discard(node)
            if proc is not None:
                self._note(node, f"agent exited with status {proc.returncode}; starting it again")
            self._start(node)

    def _start(self, node: str) -> None:
        # The agents are not part of any job: no job identity in their environment, so nothing
        # that looks for a job's processes by it (a test, an operator's ps) takes them for one.
        env = {k: v for k, v in os.environ.items() if k not in (ENV_JOB_ID, ENV_RUN_ID, ENV_ATTEMPT)}
        port = free_port()
        cmd = [
            sys.executable,
            "-m",
            "triage.cli",
            "agent",
            "--data-dir",
            str(self.data_dir),
            "--node",
            node,
            "--port",
            str(port),
            "--gpu",
            self.gpu,
            "--interval",
            str(self.interval_s),
            "--store-interval",
            str(self.interval_s),
        ]
        if self.gpu == "sim":
            cmd += ["--sim-gpus", str(self.sim_gpus)]
        if self.place is not None:
            cmd = self.place(cmd, node)
        self._started[node] = time.time()
        with open(self._log(node), "ab") as log:
            self.procs[node] = subprocess.Popen(
                cmd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 (a prebuilt prctl call only)
            )
        self.ports[node] = port
        self._publish_targets()

    def _publish_targets(self) -> None:
        """The running agents' `/metrics` addresses for Prometheus' file_sd
        (`scrape_targets_file`); the agents listen on 127.0.0.1, so only where they run here.
        Written whole and renamed into place: Prometheus may read it at any moment."""
        path = scrape_targets_file(self.data_dir, os.getpid())
        if self.place is not None:
            return  # agents on other nodes (Slurm steps): their loopback is theirs
        targets = [
            {"targets": [f"127.0.0.1:{port}"], "labels": {"triage_agent_node": node}}
            for node, port in sorted(self.ports.items())
            if self.procs[node].poll() is None
        ]
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(targets, indent=1) + "\n", encoding="utf-8")
            tmp.replace(path)
        except OSError as exc:  # the job runs on; its agents are just not found by file_sd
            log.warning("could not write the agents' scrape targets to %s: %s", path, exc)

    def _log(self, node: str) -> Path:
        return self.data_dir / "logs" / f"agent-{node}.log"

    def _note(self, node: str, text: str) -> None:
        with open(self._log(node), "a", encoding="utf-8") as log:
            log.write(f"{display.when(time.time())} triage run (pid {os.getpid()}): {text}\n")

    def ask_flush(self) -> dict[str, float]:
        """SIGUSR1 to each running agent of ours that handles it (its start-up flush mark is
        there): it stores what its node has now. Returns node -> when it was asked."""
        asked = {}
        for node, proc in self.procs.items():
            if proc.poll() is None and self.flushed_at(node) >= self._started.get(node, float("inf")):
                asked[node] = time.time()
                proc.send_signal(signal.SIGUSR1)
        return asked

    def flushed_at(self, node: str) -> float:
        """When the node's agent last began a flush on request (-inf: never, or unreadable)."""
        try:
            return float(agent_flush_mark(self.data_dir, node).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return float("-inf")

    def pids(self) -> frozenset[int]:
        """The supervisor's children that belong to no attempt, though they share its parent."""
        return frozenset(p.pid for p in self.procs.values())

    def running(self) -> set[str]:
        """The nodes whose agent of ours runs (one that stopped or never started is not)."""
        return {n for n, p in self.procs.items() if p.poll() is None}

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
        scrape_targets_file(self.data_dir, os.getpid()).unlink(missing_ok=True)
